"""Screening: a small offline classifier in front of the triage call.

It reads a message (candor.screening.features), says what kind of message it is
and how likely it is abusive, with calibrated probabilities
(candor.screening.classifier). moderate acts on what it is sure of and leaves the
rest to the model (candor.screening.policy); the model's verdicts on messages
the classifier was unsure of are kept in the state store, so that a repeat costs
no call (candor.screening.verdicts).
"""
