"""What rules ask of a file: import aliases, scopes, guards and the devices of its values."""
