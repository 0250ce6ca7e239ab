"""A bounded schemathesis run in the suite: every operation of /openapi.json, positive and negative
generation, against the real app on the Andorra bundle (in process). About 1,400-2,000 requests; the
larger run is `nox -s fuzz`. Every check runs: no 5xx, every response as the document states, schema-valid
requests accepted (positive_data_acceptance) and schema-violating ones refused (negative_data_rejection).

The document states the cross-field rules (geoengine/server/openapi.py). The few rules no JSON Schema can
state (a matrix's cell count is a product of two lengths, an encoded polyline's points are known only
after decoding, a tile's x and y are bounded by its z, OSRM's per-coordinate lists match the coordinate
count...) are listed in `openapi.UNEXPRESSIBLE`: for schema-valid data a 400 is accepted only when its
detail names one of them; any other 400 fails."""

from __future__ import annotations

import json
import os

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase  # noqa: E402
from hypothesis import settings as hyp_settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.parameters import ParameterLocation  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from geoengine.server.app import create_app  # noqa: E402
from geoengine.server.openapi import UNEXPRESSIBLE  # noqa: E402

# per operation and mode: ~35 operations x 30 x 2 modes ~ 2,000 requests; `nox -s fuzz` raises it
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "30"))


def _names_unexpressible_rule(response) -> bool:
    try:
        body = json.loads(response.content)
    except ValueError:
        return False
    detail = str(body.get("detail") or body.get("message") or "")  # problem body or OSRM's {code, message}
    return any(text in detail for text in UNEXPRESSIBLE.values())


# OSRM answers HTTP 400 for every code (its contract, docs/osrm.md); these codes are what the spec's
# endpoints answer 422 for: well-formed data the bundle cannot serve (no road near, no route)
OSRM_DATA_CODES = {"NoSegment", "NoRoute", "NoMatch", "NoTrips"}


def _osrm_data_answer(response) -> bool:
    try:
        return json.loads(response.content).get("code") in OSRM_DATA_CODES
    except (ValueError, AttributeError):
        return False


def positive_data_acceptance_but_unexpressible(ctx, response, case):
    """positive_data_acceptance, except a 400 that names a rule JSON Schema cannot state (or OSRM's 400
    for a well-formed request the bundle cannot serve)."""
    if response.status_code == 400 and (_names_unexpressible_rule(response) or _osrm_data_answer(response)):
        return None
    return positive_data_acceptance(ctx, response, case)


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, positive_data_acceptance_but_unexpressible, negative_data_rejection]


@pytest.fixture(scope="module")
def api_schema(andorra, settings, keystore):
    andorra.warm()
    app = create_app(andorra, settings, keystore)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                                    max_examples=EXAMPLES, deterministic=True)
    # 422 is a documented answer to well-formed data the bundle cannot serve (a point far from any road)
    acc = schema.config.checks.positive_data_acceptance
    acc.expected_statuses = [*acc.expected_statuses, "422"]
    return schema


def _headers_negated(case) -> bool:
    """Whether this negative case left out or broke the gateway headers (then they are not added back:
    adding them would undo the negation the check expects to be refused)."""
    comps = case.meta.components if case.meta else {}
    header = comps.get(ParameterLocation.HEADER)
    return header is not None and header.mode.is_negative


def test_api_conforms(api_schema, api_key, settings):
    from hypothesis import given

    headers = {"X-Gateway-Key": api_key, "X-Gateway-Host": settings.gateway_host}
    failures, ran = [], 0
    for result in api_schema.get_all_operations():
        op = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            calls = []

            @given(op.as_strategy(generation_mode=mode))
            @hyp_settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                          suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
            def run(case):
                calls.append(1)  # noqa: B023 - run() is called within this iteration
                case.call_and_validate(headers=None if _headers_negated(case) else headers, checks=CHECKS)

            try:
                run()
            except (Exception, BaseExceptionGroup) as exc:  # one failure per operation and mode, all reported
                failures.append(f"{op.label} [{mode.value}]: {str(exc)[:1500]}")
            ran += len(calls)
    assert ran >= 1000, ran
    assert not failures, f"{len(failures)} failing operation/mode pairs of {ran} requests:\n\n" + "\n\n".join(failures)
