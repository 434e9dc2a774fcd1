package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// The W3C Trace Context and Baggage keys that SEP-414 puts directly under
// a request's params._meta, unprefixed (the only _meta keys without a
// DNS prefix that the specification reserves).
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
	MetaBaggage     = "baggage"
)

// TraceMetaKeys are MetaTraceparent, MetaTracestate and MetaBaggage.
var TraceMetaKeys = [...]string{MetaTraceparent, MetaTracestate, MetaBaggage}

// ErrParamsNotObject reports params, or their _meta, that are not a JSON
// object, so that no _meta member can be set in them.
var ErrParamsNotObject = errors.New("protocol: params or their _meta are not a JSON object")

// SetTraceMeta returns params (the JSON encoding of a request's params: an
// object, or empty or null for none) with its _meta's trace context keys
// (TraceMetaKeys) replaced by those of carrier: every trace key params
// had is dropped, every key of carrier is set (as a JSON string). Other
// members of params and of its _meta are kept, in their order. params is
// never changed; an error matching ErrParamsNotObject means it was left
// as it is.
func SetTraceMeta(params []byte, carrier map[string]string) (ValidJSON, error) {
	if isNull(params) {
		params = nil
	}
	out, ok := spliceTraceMeta(params, carrier)
	if ok {
		return out, nil
	}
	return setTraceMetaSlow(params, carrier)
}

// spliceTraceMeta is SetTraceMeta for params whose keys need no decoding
// (the usual case): it copies members as bytes. It reports false when it
// cannot answer as encoding/json would; SetTraceMeta then decodes.
func spliceTraceMeta(params []byte, carrier map[string]string) (ValidJSON, bool) {
	var meta []byte
	metas := 0
	if params != nil {
		if !EachMember(params, func(k, v []byte) bool {
			if string(k) == "_meta" {
				meta = v
				metas++
			}
			return true
		}) || metas > 1 {
			return nil, false
		}
	}
	b := make([]byte, 0, len(params)+len(meta)/4+160)
	b = append(b, `{"_meta":{`...)
	n := 0
	if meta != nil && !isNull(meta) {
		if !EachMember(meta, func(k, v []byte) bool {
			if slices.Contains(TraceMetaKeys[:], string(k)) {
				return true
			}
			if n > 0 {
				b = append(b, ',')
			}
			b = appendRawMember(b, k, v)
			n++
			return true
		}) {
			return nil, false
		}
	}
	for _, k := range TraceMetaKeys {
		v, ok := carrier[k]
		if !ok {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, v)
		n++
	}
	b = append(b, '}')
	if params != nil {
		EachMember(params, func(k, v []byte) bool {
			if string(k) != "_meta" {
				b = append(b, ',')
				b = appendRawMember(b, k, v)
			}
			return true
		})
	}
	return append(b, '}'), true
}

// appendRawMember appends "k":v, k a key EachMember returned (no escapes).
func appendRawMember(b, k, v []byte) []byte {
	b = append(b, '"')
	b = append(b, k...)
	b = append(b, `":`...)
	return append(b, v...)
}

// setTraceMetaSlow is SetTraceMeta through encoding/json, for params whose
// keys have escapes or repeat.
func setTraceMetaSlow(params []byte, carrier map[string]string) (ValidJSON, error) {
	obj := map[string]json.RawMessage{}
	if params != nil {
		if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%w: %s", ErrParamsNotObject, truncate(params, 64))
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("%w: _meta is %s", ErrParamsNotObject, truncate(raw, 64))
		}
	}
	for _, k := range TraceMetaKeys {
		delete(meta, k)
		if v, ok := carrier[k]; ok {
			meta[k] = appendJSONString(nil, v)
		}
	}
	enc, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	obj["_meta"] = enc
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// isNull reports whether raw is empty or the JSON null.
func isNull(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
		case 'n':
			return true
		default:
			return false
		}
	}
	return true
}
