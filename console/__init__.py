"""The Streamlit operations console (``tailwatch console``): pages in ``app_pages/`` read only
through :mod:`console.data` and draw with :mod:`console.charts`. See docs/console.md."""
