// ajv 8 with ajv-formats, the JSON Schema engine of editors' YAML and JSON support,
// run by tests/support/ajv.py. Reads a job (JSON) on stdin, writes the answer (JSON).
//   {"compile": [schema, ...]}                   -> {"errors": [message or null, ...]}
//   {"schema": schema, "values": [value, ...]}   -> {"valid": [true|false, ...]}
// Strict mode throughout (ajv --strict=true): a schema ajv would only warn about fails.
"use strict";
const Ajv2020 = require("ajv/dist/2020");
const addFormats = require("ajv-formats");

function engine(schemas) {
  const ajv = new Ajv2020({strict: true, allErrors: true});
  addFormats(ajv);
  for (const schema of schemas || []) ajv.addSchema(schema);
  return ajv;
}

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const job = JSON.parse(input);
  let answer;
  if (job.compile) {
    const errors = job.compile.map((schema) => {
      try {
        engine(job.compile.filter((s) => s !== schema)).compile(schema);
        return null;
      } catch (error) {
        return String(error.message || error);
      }
    });
    answer = {errors};
  } else {
    const validate = engine([]).compile(job.schema);
    answer = {valid: job.values.map((value) => validate(value) === true)};
  }
  process.stdout.write(JSON.stringify(answer));
});
