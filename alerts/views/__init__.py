"""What ``tailwatch alerts`` and ``tailwatch incident`` print and the console shows of alerts,
incidents and rule errors: rows and text, pure functions of what the store holds."""
