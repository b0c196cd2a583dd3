"""The team server's wire: a versioned, length-prefixed msgpack RPC (`dice-lsp serve` and its clients)."""
