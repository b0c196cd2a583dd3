"""Offline tools that build the training corpus, tokenizer and token shards for dice-tiny."""
