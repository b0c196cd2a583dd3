"""The language server (pygls): feature handlers only; logic lives in the modules below it."""
