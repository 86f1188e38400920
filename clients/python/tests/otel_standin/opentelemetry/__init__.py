"""A stand-in for opentelemetry-api, for tests/test_tracing.py only (see its header): the few
names delayq/tracing.py uses, in the real package's modules, with its signatures."""
