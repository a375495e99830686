"""neuronx-cc's import name: only ``neuronxcc.nki`` (our NKI package) is provided."""
