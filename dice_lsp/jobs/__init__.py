"""Background work: the model host that loads and runs the model off the editor's event loop."""
