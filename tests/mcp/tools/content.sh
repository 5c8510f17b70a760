#!/bin/sh
# mcp-content: {"output": {"kind"}, "modelOutput": M}, M the AI SDK
# ToolResultOutput of that kind; "content" holds one part of every type.
exec jq -c '{
  "text": {type: "text", value: "plain words"},
  "json": {type: "json", value: {a: 1, b: [true, null]}},
  "error-text": {type: "error-text", value: "the quota is used up"},
  "error-json": {type: "error-json", value: {code: 429}},
  "denied": {type: "execution-denied", reason: "the user said no"},
  "content": {type: "content", value: [
    {type: "text", text: "Seattle: 21 C and sunny"},
    {type: "image-url", url: "https://example.com/radar/seattle.png"},
    {type: "image-data", mediaType: "image/png",
     data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="},
    {type: "media", data: "UklGRg==", mediaType: "audio/wav"},
    {type: "file-data", data: "JVBERi0=", mediaType: "application/pdf",
     filename: "report 1.pdf"},
    {type: "file-url", url: "https://example.com/files/report.pdf?v=2",
     mediaType: "application/pdf"},
    {type: "file-id", fileId: "file-abc123"},
    {type: "image-file-id", fileId: {openai: "file-xyz"}},
    {type: "custom", providerOptions: {anthropic: {cacheControl: {type: "ephemeral"}}}},
    {type: "image-url", url: "data:image/gif;base64,R0lGODlhAQABAAAAACw="},
    {type: "file", data: {type: "text", text: "hello"},
     mediaType: "text/plain", filename: "a.txt"},
    {type: "image-data", data: "not base64!", mediaType: "image/png"},
    {type: "hologram"}
  ]},
  "bare": "a bare string",
  "other": {answer: 42}
}[.input.kind] as $mo | {output: {kind: .input.kind}, modelOutput: $mo}'
