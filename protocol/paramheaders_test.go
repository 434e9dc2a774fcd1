package protocol

import (
	"encoding/json"
	"errors"
	"net/textproto"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func canon(name string) string { return textproto.CanonicalMIMEHeaderKey(ParamHeaderPrefix + name) }

func TestParamHeadersOfValidSchemas(t *testing.T) {
	for name, tc := range map[string]struct {
		schema string
		want   []ParamHeader
	}{
		"none":          {`{"type":"object","properties":{"q":{"type":"string"}}}`, nil},
		"not an object": {`true`, nil},
		"top level": {`{"type":"object","properties":{
			"region":{"type":"string","x-mcp-header":"Region"},
			"priority":{"type":"integer","x-mcp-header":"Priority"},
			"verbose":{"type":["boolean","null"],"x-mcp-header":"Verbose"},
			"query":{"type":"string"}}}`,
			[]ParamHeader{{"Priority", canon("Priority"), []string{"priority"}}, {"Region", canon("Region"), []string{"region"}}, {"Verbose", canon("Verbose"), []string{"verbose"}}}},
		"nested": {`{"type":"object","properties":{"options":{"type":"object","properties":{
			"tenant":{"type":"string","x-mcp-header":"Tenant-Id"}}}}}`,
			[]ParamHeader{{"Tenant-Id", canon("Tenant-Id"), []string{"options", "tenant"}}}},
		"token characters": {`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A!#$%&'*+-.^_` + "`" + `|~9"}}}`,
			[]ParamHeader{{"A!#$%&'*+-.^_`|~9", canon("A!#$%&'*+-.^_`|~9"), []string{"a"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParamHeaders(json.RawMessage(tc.schema))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The invalid definitions of the conformance suite's
// http-invalid-tool-headers scenario, and the revision's other rules.
func TestParamHeadersOfInvalidSchemas(t *testing.T) {
	for name, schema := range map[string]string{
		"empty":                `{"properties":{"v":{"type":"string","x-mcp-header":""}}}`,
		"not a string":         `{"properties":{"v":{"type":"string","x-mcp-header":7}}}`,
		"object type":          `{"properties":{"v":{"type":"object","x-mcp-header":"Data"}}}`,
		"array type":           `{"properties":{"v":{"type":"array","items":{"type":"string"},"x-mcp-header":"Items"}}}`,
		"null type":            `{"properties":{"v":{"type":"null","x-mcp-header":"Nil"}}}`,
		"number type":          `{"properties":{"v":{"type":"number","x-mcp-header":"Float"}}}`,
		"no type":              `{"properties":{"v":{"x-mcp-header":"Any"}}}`,
		"two types":            `{"properties":{"v":{"type":["string","integer"],"x-mcp-header":"Two"}}}`,
		"duplicate":            `{"properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"Region"}}}`,
		"duplicate other case": `{"properties":{"a":{"type":"string","x-mcp-header":"MyField"},"b":{"type":"string","x-mcp-header":"myfield"}}}`,
		"duplicate nested":     `{"properties":{"a":{"type":"string","x-mcp-header":"R"},"o":{"type":"object","properties":{"b":{"type":"string","x-mcp-header":"r"}}}}}`,
		"space":                `{"properties":{"v":{"type":"string","x-mcp-header":"My Header"}}}`,
		"colon":                `{"properties":{"v":{"type":"string","x-mcp-header":"My:Header"}}}`,
		"non-ASCII":            `{"properties":{"v":{"type":"string","x-mcp-header":"Héader"}}}`,
		"control character":    `{"properties":{"v":{"type":"string","x-mcp-header":"My\nHeader"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParamHeaders(json.RawMessage(schema))
			require.ErrorIs(t, err, ErrInvalidParamHeader)
			var pe *ParamHeaderError
			require.True(t, errors.As(err, &pe))
			assert.NotEmpty(t, pe.Property)
			assert.NotEmpty(t, pe.Reason)
		})
	}
}

// The values of the conformance suite's http-custom-headers scenario.
func TestParamHeaderValues(t *testing.T) {
	hs := []ParamHeader{
		{"Region", canon("Region"), []string{"region"}}, {"Priority", canon("Priority"), []string{"priority"}}, {"Verbose", canon("Verbose"), []string{"verbose"}},
		{"Debug", canon("Debug"), []string{"debug"}}, {"EmptyVal", canon("EmptyVal"), []string{"empty_val"}}, {"Method", canon("Method"), []string{"method_val"}},
		{"NonAscii", canon("NonAscii"), []string{"non_ascii_val"}}, {"Whitespace", canon("Whitespace"), []string{"whitespace_val"}},
		{"LeadingSpace", canon("LeadingSpace"), []string{"leading"}}, {"InternalSpace", canon("InternalSpace"), []string{"internal"}},
		{"ControlChar", canon("ControlChar"), []string{"control"}}, {"CrLf", canon("CrLf"), []string{"crlf"}}, {"Tab", canon("Tab"), []string{"tab"}},
		{"Absent", canon("Absent"), []string{"absent"}}, {"Null", canon("Null"), []string{"null_val"}}, {"Tenant", canon("Tenant"), []string{"o", "tenant"}},
		{"Big", canon("Big"), []string{"big"}},
	}
	args := `{"region":"us-west1","priority":42,"verbose":false,"debug":true,"empty_val":"","method_val":"test-method",
		"non_ascii_val":"Hello, 世界","whitespace_val":" padded ","leading":" us-west1","internal":"us west 1",
		"control":"line1\nline2","crlf":"line1\r\nline2","tab":"\tindented","null_val":null,"o":{"tenant":"acme"},
		"big":9007199254740991,"query":"SELECT 1"}`
	got, err := ParamHeaderValues(hs, json.RawMessage(args))
	require.NoError(t, err)
	assert.Equal(t, []ParamHeaderValue{
		{"Mcp-Param-Region", "us-west1"},
		{"Mcp-Param-Priority", "42"},
		{"Mcp-Param-Verbose", "false"},
		{"Mcp-Param-Debug", "true"},
		{"Mcp-Param-Emptyval", ""},
		{"Mcp-Param-Method", "test-method"},
		{"Mcp-Param-Nonascii", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{"Mcp-Param-Whitespace", "=?base64?IHBhZGRlZCA=?="},
		{"Mcp-Param-Leadingspace", "=?base64?IHVzLXdlc3Qx?="},
		{"Mcp-Param-Internalspace", "us west 1"},
		{"Mcp-Param-Controlchar", "=?base64?bGluZTEKbGluZTI=?="},
		{"Mcp-Param-Crlf", "=?base64?bGluZTENCmxpbmUy?="},
		{"Mcp-Param-Tab", "=?base64?CWluZGVudGVk?="},
		{"Mcp-Param-Tenant", "acme"},
		{"Mcp-Param-Big", "9007199254740991"},
	}, got, "absent and null arguments have no header")

	for name, bad := range map[string]string{
		"object":      `{"region":{"a":1}}`,
		"fraction":    `{"region":1.5}`,
		"unsafe int":  `{"region":9007199254740993}`,
		"array value": `{"region":["a"]}`,
	} {
		_, err := ParamHeaderValues(hs[:1], json.RawMessage(bad))
		assert.ErrorIs(t, err, ErrParamHeaderValue, name)
	}
	got, err = ParamHeaderValues(hs, nil)
	assert.NoError(t, err)
	assert.Empty(t, got)
}

func TestHeaderValueEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          "plain",
		"with space":     "with space",
		" lead":          "=?base64?IGxlYWQ=?=",
		"tab\t":          "=?base64?dGFiCQ==?=",
		"ünï":            "=?base64?w7xuw68=?=",
		"line\nbreak":    "=?base64?bGluZQpicmVhaw==?=",
		"=?base64?xx?=":  "=?base64?PT9iYXNlNjQ/eHg/PQ==?=",
		"":               "",
		"=?base64?xx":    "=?base64?xx",
		"a/b?c=d&e#frag": "a/b?c=d&e#frag",
	} {
		assert.Equal(t, want, EncodeHeaderValue(in), "%q", in)
	}
}
