/*
 * metaschema: the draft 2020-12 meta-schemas, built in so that a schema may
 * "$ref" https://json-schema.org/draft/2020-12/schema (to validate schemas)
 * without any network access.  Written out from the specification's
 * vocabulary definitions; annotations such as "title" are left out.
 */
#include "schema/internal.h"

#define META "https://json-schema.org/draft/2020-12/"
#define HEAD(name) "\"$schema\": \"" META "schema\", \"$id\": \"" META name "\", " \
	"\"$dynamicAnchor\": \"meta\", \"type\": [\"object\", \"boolean\"], "
#define DYN "{\"$dynamicRef\": \"#meta\"}"
#define DYNMAP "{\"type\": \"object\", \"additionalProperties\": " DYN "}"

const char *const schema__metaschemas[] = {
	"{" HEAD("schema")
	"\"$vocabulary\": {"
	"\"" META "vocab/core\": true, \"" META "vocab/applicator\": true, "
	"\"" META "vocab/unevaluated\": true, \"" META "vocab/validation\": true, "
	"\"" META "vocab/meta-data\": true, \"" META "vocab/format-annotation\": true, "
	"\"" META "vocab/content\": true}, "
	"\"allOf\": [{\"$ref\": \"meta/core\"}, {\"$ref\": \"meta/applicator\"}, "
	"{\"$ref\": \"meta/unevaluated\"}, {\"$ref\": \"meta/validation\"}, "
	"{\"$ref\": \"meta/meta-data\"}, {\"$ref\": \"meta/format-annotation\"}, "
	"{\"$ref\": \"meta/content\"}], "
	"\"properties\": {"
	"\"definitions\": " DYNMAP ", "
	"\"dependencies\": {\"type\": \"object\", \"additionalProperties\": {\"anyOf\": ["
	DYN ", {\"$ref\": \"meta/validation#/$defs/stringArray\"}]}}, "
	"\"$recursiveAnchor\": {\"$ref\": \"meta/core#/$defs/anchorString\"}, "
	"\"$recursiveRef\": {\"$ref\": \"meta/core#/$defs/uriReferenceString\"}}}",

	"{" HEAD("meta/core")
	"\"properties\": {"
	"\"$id\": {\"$ref\": \"#/$defs/uriReferenceString\", \"pattern\": \"^[^#]*#?$\"}, "
	"\"$schema\": {\"$ref\": \"#/$defs/uriString\"}, "
	"\"$ref\": {\"$ref\": \"#/$defs/uriReferenceString\"}, "
	"\"$anchor\": {\"$ref\": \"#/$defs/anchorString\"}, "
	"\"$dynamicRef\": {\"$ref\": \"#/$defs/uriReferenceString\"}, "
	"\"$dynamicAnchor\": {\"$ref\": \"#/$defs/anchorString\"}, "
	"\"$vocabulary\": {\"type\": \"object\", \"propertyNames\": "
	"{\"$ref\": \"#/$defs/uriString\"}, \"additionalProperties\": {\"type\": \"boolean\"}}, "
	"\"$comment\": {\"type\": \"string\"}, "
	"\"$defs\": " DYNMAP "}, "
	"\"$defs\": {"
	"\"anchorString\": {\"type\": \"string\", \"pattern\": \"^[A-Za-z_][-A-Za-z0-9._]*$\"}, "
	"\"uriString\": {\"type\": \"string\", \"format\": \"uri\"}, "
	"\"uriReferenceString\": {\"type\": \"string\", \"format\": \"uri-reference\"}}}",

	"{" HEAD("meta/applicator")
	"\"properties\": {"
	"\"prefixItems\": {\"$ref\": \"#/$defs/schemaArray\"}, "
	"\"items\": " DYN ", \"contains\": " DYN ", "
	"\"additionalProperties\": " DYN ", "
	"\"properties\": " DYNMAP ", "
	"\"patternProperties\": {\"type\": \"object\", \"additionalProperties\": " DYN ", "
	"\"propertyNames\": {\"format\": \"regex\"}}, "
	"\"dependentSchemas\": " DYNMAP ", "
	"\"propertyNames\": " DYN ", "
	"\"if\": " DYN ", \"then\": " DYN ", \"else\": " DYN ", "
	"\"allOf\": {\"$ref\": \"#/$defs/schemaArray\"}, "
	"\"anyOf\": {\"$ref\": \"#/$defs/schemaArray\"}, "
	"\"oneOf\": {\"$ref\": \"#/$defs/schemaArray\"}, "
	"\"not\": " DYN "}, "
	"\"$defs\": {\"schemaArray\": {\"type\": \"array\", \"minItems\": 1, \"items\": " DYN "}}}",

	"{" HEAD("meta/unevaluated")
	"\"properties\": {\"unevaluatedItems\": " DYN ", \"unevaluatedProperties\": " DYN "}}",

	"{" HEAD("meta/validation")
	"\"properties\": {"
	"\"type\": {\"anyOf\": [{\"$ref\": \"#/$defs/simpleTypes\"}, {\"type\": \"array\", "
	"\"items\": {\"$ref\": \"#/$defs/simpleTypes\"}, \"minItems\": 1, \"uniqueItems\": true}]}, "
	"\"const\": true, \"enum\": {\"type\": \"array\", \"items\": true}, "
	"\"multipleOf\": {\"type\": \"number\", \"exclusiveMinimum\": 0}, "
	"\"maximum\": {\"type\": \"number\"}, \"exclusiveMaximum\": {\"type\": \"number\"}, "
	"\"minimum\": {\"type\": \"number\"}, \"exclusiveMinimum\": {\"type\": \"number\"}, "
	"\"maxLength\": {\"$ref\": \"#/$defs/nonNegativeInteger\"}, "
	"\"minLength\": {\"$ref\": \"#/$defs/nonNegativeIntegerDefault0\"}, "
	"\"pattern\": {\"type\": \"string\", \"format\": \"regex\"}, "
	"\"maxItems\": {\"$ref\": \"#/$defs/nonNegativeInteger\"}, "
	"\"minItems\": {\"$ref\": \"#/$defs/nonNegativeIntegerDefault0\"}, "
	"\"uniqueItems\": {\"type\": \"boolean\"}, "
	"\"maxContains\": {\"$ref\": \"#/$defs/nonNegativeInteger\"}, "
	"\"minContains\": {\"$ref\": \"#/$defs/nonNegativeInteger\"}, "
	"\"maxProperties\": {\"$ref\": \"#/$defs/nonNegativeInteger\"}, "
	"\"minProperties\": {\"$ref\": \"#/$defs/nonNegativeIntegerDefault0\"}, "
	"\"required\": {\"$ref\": \"#/$defs/stringArray\"}, "
	"\"dependentRequired\": {\"type\": \"object\", \"additionalProperties\": "
	"{\"$ref\": \"#/$defs/stringArray\"}}}, "
	"\"$defs\": {"
	"\"nonNegativeInteger\": {\"type\": \"integer\", \"minimum\": 0}, "
	"\"nonNegativeIntegerDefault0\": {\"$ref\": \"#/$defs/nonNegativeInteger\"}, "
	"\"simpleTypes\": {\"enum\": [\"array\", \"boolean\", \"integer\", \"null\", "
	"\"number\", \"object\", \"string\"]}, "
	"\"stringArray\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, "
	"\"uniqueItems\": true}}}",

	"{" HEAD("meta/meta-data")
	"\"properties\": {\"title\": {\"type\": \"string\"}, "
	"\"description\": {\"type\": \"string\"}, \"default\": true, "
	"\"deprecated\": {\"type\": \"boolean\"}, \"readOnly\": {\"type\": \"boolean\"}, "
	"\"writeOnly\": {\"type\": \"boolean\"}, \"examples\": {\"type\": \"array\", "
	"\"items\": true}}}",

	"{" HEAD("meta/format-annotation")
	"\"properties\": {\"format\": {\"type\": \"string\"}}}",

	"{" HEAD("meta/content")
	"\"properties\": {\"contentEncoding\": {\"type\": \"string\"}, "
	"\"contentMediaType\": {\"type\": \"string\"}, \"contentSchema\": " DYN "}}",

	NULL,
};
