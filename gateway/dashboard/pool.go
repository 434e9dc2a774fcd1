package dashboard

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// poolReport is the body of GET /admin/pool: what the supervisor's pool
// holds and what of it the gateway offers downstream.
type poolReport struct {
	Tools     []poolTool     `json:"tools"`
	Prompts   []poolPrompt   `json:"prompts"`
	Resources []poolResource `json:"resources"`
	Templates []poolTemplate `json:"templates"`
	// Withheld are the tools each server lists that wait for approval
	// of their definition (ServerStatus.WithheldTools).
	Withheld map[string][]string `json:"withheld,omitempty"`
}

// poolTool is one tool of the pool.
type poolTool struct {
	// Name is the name downstream clients call; Qualified the pool's.
	Name      string `json:"name"`
	Qualified string `json:"qualified"`
	Server    string `json:"server,omitempty"`
	Builtin   bool   `json:"builtin,omitempty"`
	Trusted   bool   `json:"trusted,omitempty"`
	// Offered is false for a tool the gateway's allow/deny filters hide.
	Offered bool `json:"offered"`
	// RenamedFrom is the qualified name the tool lost to a collision;
	// Holder is who holds that name.
	RenamedFrom string        `json:"renamedFrom,omitempty"`
	Holder      string        `json:"holder,omitempty"`
	Definition  protocol.Tool `json:"definition"`
}

type poolPrompt struct {
	Name        string          `json:"name"`
	Server      string          `json:"server"`
	RenamedFrom string          `json:"renamedFrom,omitempty"`
	Prompt      protocol.Prompt `json:"prompt"`
}

type poolResource struct {
	Server   string            `json:"server"`
	Resource protocol.Resource `json:"resource"`
}

type poolTemplate struct {
	Server   string                    `json:"server"`
	Template protocol.ResourceTemplate `json:"template"`
}

// servePool: GET /admin/pool, what the request's caller may see of it
// (gateway.View: the tools tools/list would list it, the prompts,
// resources, templates and withheld tools of its servers).
func (d *Dashboard) servePool(w http.ResponseWriter, r *http.Request) {
	site, b := d.site, d.site.Backend()
	view := site.View(r)
	rep := poolReport{Tools: []poolTool{}, Prompts: []poolPrompt{}, Resources: []poolResource{}, Templates: []poolTemplate{}}
	tools := b.Tools()
	holder := make(map[string]mcpvisor.Tool, len(tools))
	for _, t := range tools {
		holder[t.Name] = t
	}
	for _, t := range tools {
		if !view.Tool(t) {
			continue
		}
		pt := poolTool{Name: site.ToolName(t), Qualified: t.Name, Server: t.Server, Builtin: t.Builtin, Trusted: t.Trusted,
			Offered: site.Offered(t.Name), Definition: t.Definition}
		if !t.Builtin {
			if q := mcpvisor.QualifiedName(t.Server, t.Definition.Name); q != t.Name {
				pt.RenamedFrom = q
				if h, ok := holder[q]; ok && view.Tool(h) {
					pt.Holder = h.Server + "/" + h.Definition.Name
					if h.Builtin {
						pt.Holder = "built-in"
					}
				}
			}
		}
		rep.Tools = append(rep.Tools, pt)
	}
	if src, ok := b.(gateway.PromptSource); ok {
		prompts, _ := src.Prompts().List("")
		for _, p := range prompts {
			if !view.Server(p.Server) {
				continue
			}
			pp := poolPrompt{Name: p.Name, Server: p.Server, Prompt: p.Prompt}
			if q := mcpvisor.QualifiedName(p.Server, p.Prompt.Name); q != p.Name {
				pp.RenamedFrom = q
			}
			rep.Prompts = append(rep.Prompts, pp)
		}
	}
	if src, ok := b.(gateway.ResourceSource); ok {
		res, tpls, _ := src.Resources().List("")
		for _, r := range res {
			if !view.Server(r.Server) {
				continue
			}
			rep.Resources = append(rep.Resources, poolResource{Server: r.Server, Resource: r.Resource})
		}
		for _, t := range tpls {
			if !view.Server(t.Server) {
				continue
			}
			rep.Templates = append(rep.Templates, poolTemplate{Server: t.Server, Template: t.Template})
		}
	}
	for _, s := range b.Status() {
		if len(s.WithheldTools) > 0 && view.Server(s.Name) {
			if rep.Withheld == nil {
				rep.Withheld = map[string][]string{}
			}
			rep.Withheld[s.Name] = s.WithheldTools
		}
	}
	slices.SortFunc(rep.Tools, func(a, b poolTool) int { return strings.Compare(a.Qualified, b.Qualified) })
	writeJSON(w, http.StatusOK, rep)
}

// channelsReport is the body of GET /admin/channels.
type channelsReport struct {
	// Permissions are the permission requests waiting for an answer.
	Permissions []permissionReport `json:"permissions"`
	// Messages are the last channel messages servers pushed (at most
	// maxChannelLog), oldest first.
	Messages []channelRecord `json:"messages"`
	// Waiting counts the wait_for_channel_message calls waiting now.
	Waiting int `json:"waiting"`
}

type permissionReport struct {
	ID           string    `json:"id"`
	Server       string    `json:"server,omitempty"`
	ToolName     string    `json:"toolName"`
	Description  string    `json:"description"`
	InputPreview string    `json:"inputPreview,omitempty"`
	Created      time.Time `json:"created"`
	Expires      time.Time `json:"expires"`
}

// serveChannels: GET /admin/channels, the messages and permission
// requests of the servers the request's caller may use (the count of
// waiting calls is the whole gateway's: a caller no rule restricts only).
func (d *Dashboard) serveChannels(w http.ResponseWriter, r *http.Request) {
	d.feed.start()
	view := d.site.View(r)
	rep := channelsReport{Permissions: []permissionReport{}, Messages: visibleChannels(view, d.feed.channelLog())}
	if src, ok := d.site.Backend().(gateway.ChannelSource); ok {
		for _, p := range src.Channels().PendingPermissions() {
			if !view.Server(p.Server) {
				continue
			}
			rep.Permissions = append(rep.Permissions, permissionReport{
				ID: p.ID, Server: p.Server, ToolName: p.Request.ToolName, Description: p.Request.Description,
				InputPreview: p.Request.InputPreview, Created: p.Created, Expires: p.Expires,
			})
		}
	}
	if view.All() {
		rep.Waiting = d.site.ChannelWaits()
	}
	writeJSON(w, http.StatusOK, rep)
}
