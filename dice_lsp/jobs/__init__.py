"""Background work: the model host that loads and runs the model off the editor's event loop."""

# Here rather than in model_host (which loads torch) so `dice-lsp serve --help` reads it without the model.
MAX_BATCH_ROWS = 32  # rows of one denoising batch: past this a small model's step time grows linearly
