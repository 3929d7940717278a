"""Hand-offs: a visitor candor could not help asks for a person, with the conversation.

`POST /handoff` (candor.api.handoff) takes the signed session, the visitor's
address and message; candor.handoffs.service checks and stores the hand-off
before anything else (candor.handoffs.store), with the transcript the server
builds from the session itself (candor.handoffs.transcript), then forwards it to
the owner (candor.handoffs.forward: a signed webhook, and on AWS an e-mail through
SES), retrying until it is delivered (candor.handoffs.dispatch).
"""
