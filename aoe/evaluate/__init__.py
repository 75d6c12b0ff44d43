"""Evaluation protocols: each turns an encoder and prepared test tables into a JSON-able result."""
