# Tailwatch: one image for the engine, the collector (+ alert evaluator) and the console;
# docker-compose.yml picks the command. CPU torch by default (the engine uses CUDA when the
# container is given a GPU and a CUDA build of torch).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

# NOTE: torch first, from the CPU index, so the next layer does not pull a CUDA build.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
# NOTE: structured outputs' xgrammar without triton (a GPU compiler; pyproject.toml says why).
RUN pip install --no-deps xgrammar==0.2.9
COPY pyproject.toml README.md ./
COPY tailwatch tailwatch
COPY engine engine
COPY slo slo
COPY collectors collectors
COPY alerts alerts
COPY console console
COPY loadgen loadgen
RUN pip install '.[postgres]'

RUN useradd --create-home tailwatch
USER tailwatch
ENTRYPOINT ["tailwatch"]
CMD ["--help"]
