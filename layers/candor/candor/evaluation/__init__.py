"""`candor eval`: retrieval and agent metrics on a question set over a document folder."""
