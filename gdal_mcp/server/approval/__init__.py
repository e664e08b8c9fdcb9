"""Approval: which calls change existing data, the question a person answers, and the confirmations parked for the
approval console. Imports nothing from the web or tools rooms (tests/test_architecture.py)."""
