"""The governed runtime that generated packages import; it imports no compiler dependency."""
