"""prefixsim: a discrete-event simulator of vLLM v1 prefix caching under load.

Docstrings cite the project's docs/: `spec §N` is docs/spec.md, `cost_model.md §N` and
`replay_formats.md §N` the files of those names there.
"""

__version__ = "0.1.0"
