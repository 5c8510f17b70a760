/*
 * validate: `berth validate [-r FILE|DIR]... SCHEMA_FILE [INSTANCE_FILE|-]`,
 * which checks a JSON document against a JSON Schema (draft 2020-12, or
 * draft-07 when the schema says so) without a daemon.
 */
#ifndef BERTH_CLI_VALIDATE_H
#define BERTH_CLI_VALIDATE_H

/*
 * cli_validate_main runs the command; argv[0] is "validate".  It compiles
 * SCHEMA_FILE and, when an instance is given (a file, or "-" for standard
 * input), validates it.  Returns the exit status:
 *   0  the schema is valid and so is the instance (nothing is printed);
 *   1  the instance is invalid: one line per error on standard output,
 *      "INSTANCE_PATH: MESSAGE (KEYWORD)", where the path is a JSON Pointer
 *      and the root is written "(root)";
 *   2  usage error, a file cannot be read or parsed, or the schema is
 *      invalid: one line on standard error saying why.
 * Option --assert-formats makes "format" an assertion (see schema.h).
 * Each -r FILE (--ref), or every *.json file of -r DIR, is a schema that
 * "$ref" may reach, by its "$id" or by its path as a file:// URI; the
 * schema file's own base, when it has no "$id", is its file:// URI.
 */
int cli_validate_main(int argc, char **argv);

#endif
