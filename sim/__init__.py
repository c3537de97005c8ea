"""prefixsim: a discrete-event simulator of vLLM v1 prefix caching under load."""

__version__ = "0.1.0"
