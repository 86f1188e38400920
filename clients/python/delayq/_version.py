"""The client's version: the delayq server release it was written for."""

__version__ = "0.1.0"
