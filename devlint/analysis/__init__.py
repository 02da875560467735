"""What rules ask of a file: import aliases, scopes and guards, and (later) devices."""
