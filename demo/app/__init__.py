"""The app's rules, without its user interface: what a deployment offers and allows.

- ``deployment``  the settings read once at start, the catalog, and the door from a name to a model
- ``catalog``     the curated Hub models and pairs, plus local ones (short names)
- ``budget``      how much work a request is, counted before it runs (one cost model)
- ``limits``      per-request caps and the parsing of what people type; runs per visitor
- ``self_check``  the start-up check of the default models (``mlm-icl check-model``'s checks)
- ``in_effect``   what a request's settings do on its model: the unused left out and said, a seed drawn
- ``reproduce``   the Python call and the ``mlm-icl`` command behind a result
- ``shared_results`` identical requests computed once: single flight, kept answers
- ``downloads``   the web app's download folder: a folder per file, swept after a day
"""
