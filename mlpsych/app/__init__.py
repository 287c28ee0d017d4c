"""The Streamlit app: the page (``page``, which ships in the package; ``mlpsych app`` runs it with ``launch``, a
checkout's ``app.py`` too) over plain, testable modules.

``logic`` (uploads, question templates and the form, presets), ``preflight`` (are the run's models here?),
``runner`` (one run, as a record), ``estimate`` (progress and time left from the pipeline's events), ``results``
(the tables, filters and downloads), ``demo`` (the tiny models as a way forward).
"""
