"""The jobs every surface runs, and the model host they run the model on: `api` (one request type per job and
`Jobs`, the interface the command line, the language server and the team server's service call), `local` (the
jobs on this machine; a team server's are `remote.team`), `model_host` (loads and runs the model off the
caller's event loop) and `status` (the model's state as the editor and the team server see it)."""

# Here rather than in model_host (which loads torch) so `dice-lsp serve --help` reads it without the model.
MAX_BATCH_ROWS = 32  # rows of one denoising batch: past this a small model's step time grows linearly
