"""The group coordinator's error codes are Kafka's numbers (checked against kafka-python's
independent table of Kafka's ``Errors``; 81-86 were shifted before issue 30)."""

from __future__ import annotations

import pytest

from kafkastore.server.error_codes import ErrorCode

kafka_errors = pytest.importorskip("kafka.errors", reason="kafka-python not installed")


@pytest.mark.parametrize("name, theirs", [
    ("GROUP_MAX_SIZE_REACHED", "GroupMaxSizeReachedError"),
    ("FENCED_INSTANCE_ID", "FencedInstanceIdError"),
    ("ELIGIBLE_LEADERS_NOT_AVAILABLE", "EligibleLeadersNotAvailableError"),
    ("ELECTION_NOT_NEEDED", "ElectionNotNeededError"),
    ("NO_REASSIGNMENT_IN_PROGRESS", "NoReassignmentInProgressError"),
    ("GROUP_SUBSCRIBED_TO_TOPIC", "GroupSubscribedToTopicError"),
    ("MEMBER_ID_REQUIRED", "MemberIdRequiredError"),
    ("UNSTABLE_OFFSET_COMMIT", "UnstableOffsetCommitError"),
    ("NON_EMPTY_GROUP", "NonEmptyGroupError"),
    ("GROUP_ID_NOT_FOUND", "GroupIdNotFoundError"),
    ("REBALANCE_IN_PROGRESS", "RebalanceInProgressError"),
    ("ILLEGAL_GENERATION", "IllegalGenerationError"),
    ("UNKNOWN_MEMBER_ID", "UnknownMemberIdError"),
])
def test_codes_are_kafkas(name, theirs):
    assert int(getattr(ErrorCode, name)) == getattr(kafka_errors, theirs).errno
