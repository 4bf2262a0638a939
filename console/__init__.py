"""The Streamlit operations console (``tailwatch console``): pages in ``app_pages/`` read only
through :mod:`console.data` and draw with :mod:`console.charts`; the Incidents and Knob lab
pages' parts are the subpackages :mod:`console.incidents` and :mod:`console.knob_lab`. See
docs/console.md."""
