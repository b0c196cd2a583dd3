"""The completion pipeline's stages as a package: `sources` propose candidates for a hole (the model's fills are
one source; the document is another), which the checks, ranking and decision of `dice_lsp.complete` then judge."""
