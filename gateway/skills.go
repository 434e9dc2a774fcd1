package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The skills extension (io.modelcontextprotocol/skills, SEP-2640) of the
// servers behind the gateway. The gateway declares it to stateless-era
// clients while at least one ready server does (with directoryRead when
// one of them does). skills/list gathers every such server's skills (all
// their pages, as one page); skills/get and resources/directory/read go
// to the servers in turn until one knows the URI (-32602 when none does).
// The skills' files are resources of their servers, listed and read like
// any other.

// maxSkillPages bounds the pages of one server's skills/list.
const maxSkillPages = 100

// skillServers returns the ready servers that declare the extension, and
// the settings to declare for the gateway.
func (pl *pool) skillServers() (servers []string, settings json.RawMessage) {
	directoryRead := false
	for _, st := range pl.b.Status() {
		if st.State != mcpvisor.StateReady || st.ToggledOff || st.Capabilities == nil {
			continue
		}
		raw, ok := st.Capabilities.Extensions[protocol.ExtensionSkills]
		if !ok {
			continue
		}
		servers = append(servers, st.Name)
		var s struct {
			DirectoryRead bool `json:"directoryRead"`
		}
		if json.Unmarshal(raw, &s) == nil && s.DirectoryRead {
			directoryRead = true
		}
	}
	if len(servers) == 0 {
		return nil, nil
	}
	if directoryRead {
		return servers, json.RawMessage(`{"directoryRead":true}`)
	}
	return servers, json.RawMessage(`{}`)
}

// skillsRequest serves skills/list, skills/get and
// resources/directory/read for a stateless-era client, from the servers
// that may (the access rules: accessView.serverFilter) accepts.
func (pl *pool) skillsRequest(ctx context.Context, m *mcpserver.Request, may func(server string) bool) (any, *protocol.Error) {
	src, ok := pl.b.(ServerSource)
	servers, _ := pl.skillServers()
	if requestOf(ctx) == nil || !ok || len(servers) == 0 {
		return nil, errorf(protocol.CodeMethodNotFound, "method not found: %s", m.Method)
	}
	servers = slices.DeleteFunc(servers, func(s string) bool { return !may(s) })
	caps := m.Capabilities()
	o := mcpvisor.RequestOptions{Capabilities: &caps}
	var params map[string]json.RawMessage
	if len(m.Params) > 0 && json.Unmarshal(m.Params, &params) != nil {
		return nil, errorf(protocol.CodeInvalidParams, "%s: params are not an object", m.Method)
	}
	delete(params, "_meta")
	if m.Method == protocol.MethodSkillsList {
		var all []json.RawMessage
		for _, server := range servers {
			cursor := ""
			for range maxSkillPages {
				p := json.RawMessage(`{}`)
				if cursor != "" {
					p, _ = json.Marshal(map[string]string{"cursor": cursor})
				}
				raw, err := src.Server(server).Request(ctx, m.Method, p, o)
				if err != nil {
					pl.log.Debug().Err(err).Str("server", server).Msg("skills/list")
					break
				}
				var page struct {
					Skills     []json.RawMessage `json:"skills"`
					NextCursor string            `json:"nextCursor"`
				}
				if json.Unmarshal(raw, &page) != nil {
					break
				}
				all = append(all, page.Skills...)
				if page.NextCursor == "" || page.NextCursor == cursor {
					break
				}
				cursor = page.NextCursor
			}
		}
		if all == nil {
			all = []json.RawMessage{}
		}
		return map[string]any{"skills": all}, nil
	}
	// skills/get and resources/directory/read name a URI: the server that
	// serves it answers; the others say -32602.
	body, _ := json.Marshal(params)
	var last error
	for _, server := range servers {
		raw, err := src.Server(server).Request(ctx, m.Method, body, o)
		if err == nil {
			return protocol.ValidJSON(raw), nil
		}
		last = err
	}
	var pe *protocol.Error
	if errors.As(last, &pe) && pe.Code != protocol.CodeInvalidParams {
		return nil, pe
	}
	return nil, errorf(protocol.CodeInvalidParams, "%s: no server serves that URI", m.Method)
}
