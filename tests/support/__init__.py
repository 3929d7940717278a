"""Test support: fakes that implement the ports, wire-format servers, DynamoDB Local, fixtures."""
