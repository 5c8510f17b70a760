"""Tool definitions: createTool()'s fields in Python, what they become on
the wire, and the clear errors of a wrong one."""
# No "from __future__ import annotations": pydantic 1 must see the
# annotations of the models made inside the tests as types.
import json
import os
import subprocess
import tempfile
import unittest
from typing import Optional

import support
import berth

try:
    import pydantic
except ImportError:
    pydantic = None


async def noop(input, ctx):
    return input


class Definitions(unittest.TestCase):

    def test_tool_decorator__bare__takes_name_and_docstring(self):
        @berth.tool
        async def lookup_customer(input):
            """Looks up a customer."""
            return {}

        self.assertIsInstance(lookup_customer, berth.Tool)
        self.assertEqual(lookup_customer.definition(),
                         {"id": "lookup_customer",
                          "description": "Looks up a customer."})

    def test_tool_decorator__with_fields__makes_the_definition(self):
        @berth.tool(id="weather-tool", description="Weather",
                    title="Weather Lookup",
                    input_schema={"type": "object",
                                  "properties": {"location": {
                                      "type": "string"}},
                                  "required": ["location"]},
                    output_schema={"type": "object"},
                    suspend_schema={"type": "object"},
                    resume_schema={"type": "object"},
                    request_context_schema={"type": "object"},
                    strict=True,
                    input_examples=[{"input": {"location": "Paris"}}],
                    provider_options={"anthropic": {"cache": True}},
                    require_approval=True,
                    approval_policy={"selfApproval": False, "quorum": 2},
                    background={"timeoutMs": 10000, "maxRetries": 2,
                                "backoffMs": 500},
                    mcp={"annotations": {"readOnlyHint": True},
                         "_meta": {"version": "1"}})
        def weather(input):
            return {"location": input["location"]}

        d = weather.definition()
        self.assertEqual(d["id"], "weather-tool")
        self.assertEqual(d["title"], "Weather Lookup")
        self.assertTrue(d["strict"])
        self.assertTrue(d["requireApproval"])
        self.assertEqual(d["approvalPolicy"], {"selfApproval": False,
                                               "quorum": 2})
        self.assertEqual(d["background"], {"timeoutMs": 10000,
                                           "maxRetries": 2, "backoffMs": 500})
        self.assertEqual(d["inputExamples"],
                         [{"input": {"location": "Paris"}}])
        self.assertEqual(d["mcp"]["_meta"], {"version": "1"})
        self.assertNotIn("functions", d)
        for key in ("inputSchema", "outputSchema", "suspendSchema",
                    "resumeSchema", "requestContextSchema"):
            self.assertIn(key, d)
        # A Tool is still its function.
        self.assertEqual(weather({"location": "Oslo"}), {"location": "Oslo"})
        json.dumps(d)  # all of it is JSON

    def test_background__mastras_retries_is_taken_and_ported_names_name_berths(
            self):
        # berthd reads Mastra's RetryConfig (docs/TOOLS.md), which the
        # SDK refused; a name a port brings is refused naming berth's
        # field, as berthd names it.
        t = berth.Tool("t", noop, background={
            "retries": {"maxRetries": 2, "retryDelayMs": 200}})
        self.assertEqual(t.definition()["background"], {
            "retries": {"maxRetries": 2, "retryDelayMs": 200}})
        for key, berths in (("retryDelay", "backoffMs"),
                            ("timeout", "timeoutMs"),
                            ("maxRetry", "maxRetries")):
            with self.subTest(key=key):
                with self.assertRaisesRegex(ValueError, berths):
                    berth.Tool("t", noop, background={key: 1})
        with self.assertRaisesRegex(TypeError, "RetryConfig"):
            berth.Tool("t", noop, background={"retries": 3})

    def test_background__in_seconds__becomes_milliseconds(self):
        t = berth.Tool("t", noop, background=berth.Background(
            enabled=True, timeout=1.5, max_retries=0, concurrency=4,
            backoff=0.25, backoff_max=60, on_interrupt="retry"))
        self.assertEqual(t.definition()["background"], {
            "enabled": True, "timeoutMs": 1500, "backoffMs": 250,
            "backoffMaxMs": 60000, "maxRetries": 0, "concurrency": 4,
            "onInterrupt": "retry"})

    def test_background__a_duration_under_a_millisecond__is_refused_naming_it(
            self):
        # 0 ms is berthd's "not given": the tool would get the default.
        for field in ("timeout", "backoff", "backoff_max"):
            for value in (0, 0.0004):
                with self.subTest(field=field, value=value):
                    with self.assertRaisesRegex(
                            ValueError, "background.%s must be at least "
                            "0.001 s" % field):
                        berth.Tool("t", noop, background=berth.Background(
                            **{field: value}))
        t = berth.Tool("t", noop, background=berth.Background(timeout=0.001))
        self.assertEqual(t.definition()["background"], {"timeoutMs": 1})

    def test_functions__are_declared_by_stage(self):
        t = berth.Tool("t", noop, require_approval=lambda i: True,
                       to_model_output=lambda o: o,
                       transform=berth.Transform(
                           display={"resume": lambda t: 1,
                                    "input": lambda t: 2},
                           transcript={}),
                       on_input_available=lambda i: None)
        d = t.definition()
        self.assertEqual(d["requireApproval"], "function")
        self.assertEqual(d["functions"], {
            "toModelOutput": True,
            "transform": {"display": ["input", "resume"]},
            "onInputAvailable": True})
        self.assertEqual(t.transformed_stages(), {"input", "resume"})

    def test_wrong_fields__are_refused_with_what_is_wrong(self):
        cases = [
            (dict(transform={"display": {"inputDelta": lambda t: 1}}),
             ValueError, "inputDelta has no source"),
            (dict(transform={"screen": {"input": lambda t: 1}}),
             ValueError, "no target 'screen'"),
            (dict(transform={"display": {"input": "not a function"}}),
             TypeError, "transform.display.input must be a function"),
            (dict(require_approval="yes"), TypeError,
             "require_approval must be a bool or a function"),
            (dict(background={"retryDelay": 5}), ValueError,
             "no field 'retryDelay'"),
            (dict(background=berth.Background(on_interrupt="later")),
             ValueError, "on_interrupt"),
            (dict(background=berth.Background(timeout=-1)), ValueError,
             "timeout"),
            # The dict's values too, as Background's (before: only at
            # registration).
            (dict(background={"onInterrupt": "maybe"}), ValueError,
             "'onInterrupt'\\] must be 'retry' or 'fail'"),
            (dict(background={"timeoutMs": "x"}), ValueError,
             "'timeoutMs'\\] must be an integer >= 0 \\(milliseconds\\)"),
            (dict(background={"maxRetries": -3}), ValueError,
             "'maxRetries'\\] must be an integer >= 0"),
            (dict(background={"enabled": 1}), TypeError,
             "'enabled'\\] must be True or False"),
            (dict(input_schema="string"), TypeError,
             "inputSchema must be a JSON Schema"),
            (dict(input_examples=[{"location": "Paris"}]), TypeError,
             "input_examples\\[0\\]"),
            (dict(mcp={"annotation": {}}), ValueError, "no field"),
            (dict(strict="yes"), TypeError, "strict"),
        ]
        for fields, exc, text in cases:
            with self.assertRaisesRegex(exc, text, msg=str(fields)):
                berth.Tool("bad", noop, **fields)
        with self.assertRaisesRegex(ValueError, "non-empty string"):
            berth.Tool("", noop)
        with self.assertRaisesRegex(TypeError, "execute must be a function"):
            berth.Tool("t", None)  # type: ignore[arg-type]

        def kw_only(input, *, must):
            return 1
        with self.assertRaisesRegex(TypeError, "keyword-only"):
            berth.Tool("t", kw_only)

    def test_worker__refuses_what_it_cannot_serve(self):
        with self.assertRaisesRegex(ValueError, "two tools"):
            berth.Worker([berth.Tool("a", noop), berth.Tool("a", noop)],
                         socket="/x")
        with self.assertRaisesRegex(ValueError, "1 to 1000"):
            berth.Worker([], socket="/x")
        with self.assertRaisesRegex(ValueError, "concurrency"):
            berth.Worker([berth.Tool("a", noop)], socket="/x",
                         concurrency=0)
        with self.assertRaisesRegex(TypeError, "berth.Tool"):
            berth.Worker([noop], socket="/x")  # type: ignore[list-item]


@unittest.skipIf(pydantic is None, "pydantic is not installed")
class Pydantic(unittest.TestCase):

    def models(self):
        class Address(pydantic.BaseModel):
            city: str
            zip: Optional[str] = None  # pydantic 1 has no X | None

        class Order(pydantic.BaseModel):
            sku: str
            quantity: int = 1
            ship_to: Address

        return Address, Order

    def test_models__become_json_schema(self):
        Address, Order = self.models()
        t = berth.Tool("order", noop, input_schema=Order,
                       output_schema=Address)
        d = t.definition()
        self.assertEqual(d["inputSchema"]["type"], "object")
        self.assertIn("ship_to", d["inputSchema"]["properties"])
        self.assertIs(t.models["inputSchema"], Order)

    def test_models__schemas_are_ones_berths_validator_takes(self):
        berth_cli = support.find_berth()
        if berth_cli is None:
            self.skipTest("no berth command: set BERTH")
        Address, Order = self.models()
        schema = berth.Tool("order", noop,
                            input_schema=Order).definition()["inputSchema"]
        with tempfile.TemporaryDirectory() as tmp:
            def check(instance):
                sp, ip = os.path.join(tmp, "s.json"), os.path.join(tmp,
                                                                   "i.json")
                with open(sp, "w") as f:
                    json.dump(schema, f)
                with open(ip, "w") as f:
                    json.dump(instance, f)
                return subprocess.run([berth_cli, "validate", sp, ip],
                                      capture_output=True, text=True)
            ok = check({"sku": "a", "ship_to": {"city": "Oslo"}})
            self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
            bad = check({"sku": "a", "ship_to": {"zip": "0150"}})
            self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
            self.assertIn("city", bad.stdout + bad.stderr)
            # The None an Optional field takes passes the model's schema:
            # pydantic 1's schema() (Debian's) left null out, so a None
            # in an output, or a null input, failed the tool's own
            # schema in berthd.
            nulls = check({"sku": "a", "ship_to": {"city": "Oslo",
                                                   "zip": None}})
            self.assertEqual(nulls.returncode, 0,
                             nulls.stdout + nulls.stderr)


if __name__ == "__main__":
    unittest.main()
