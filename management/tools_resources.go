package management

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mcpvisor/mcpvisor"
)

// The resource tools: ListMcpResources, ListMcpResourceTemplates,
// ReadMcpResource, SubscribeMcpResource and UnsubscribeMcpResource.

// serverArg is the input of the tools that take a server alone.
type serverArg struct {
	Server string `json:"server"`
}

// resourceItem is one element of ListMcpResources' output.
type resourceItem struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	MimeType    string `json:"mimeType,omitempty"`
	Description string `json:"description,omitempty"`
	Server      string `json:"server"`
}

// templateItem is one element of ListMcpResourceTemplates' output.
type templateItem struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	MimeType    string `json:"mimeType,omitempty"`
	Description string `json:"description,omitempty"`
	Server      string `json:"server"`
}

func listResourcesTool(_ context.Context, s *mcpvisor.Supervisor, args json.RawMessage) (any, error) {
	var a serverArg
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	rs, _, err := s.Resources().List(a.Server)
	if err != nil {
		return nil, err
	}
	out := make([]resourceItem, 0, len(rs))
	for _, r := range rs {
		out = append(out, resourceItem{URI: r.Resource.URI, Name: r.Resource.Name, MimeType: r.Resource.MimeType,
			Description: r.Resource.Description, Server: r.Server})
	}
	return out, nil
}

func listTemplatesTool(_ context.Context, s *mcpvisor.Supervisor, args json.RawMessage) (any, error) {
	var a serverArg
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	_, ts, err := s.Resources().List(a.Server)
	if err != nil {
		return nil, err
	}
	out := make([]templateItem, 0, len(ts))
	for _, t := range ts {
		out = append(out, templateItem{URITemplate: t.Template.URITemplate, Name: t.Template.Name, MimeType: t.Template.MimeType,
			Description: t.Template.Description, Server: t.Server})
	}
	return out, nil
}

// resourceArgs is the input of ReadMcpResource and SubscribeMcpResource.
type resourceArgs struct {
	Server string `json:"server"`
	URI    string `json:"uri"`
	Reason string `json:"reason"`
}

func (a resourceArgs) check() error {
	if err := required("server", a.Server); err != nil {
		return err
	}
	return required("uri", a.URI)
}

// readOutput is ReadMcpResource's output.
type readOutput struct {
	Contents []contentItem `json:"contents"`
}

// contentItem is one of ReadMcpResource's contents. A blob is described
// in Text, its size in BlobBytes (an extra member), never included.
type contentItem struct {
	URI       string `json:"uri"`
	MimeType  string `json:"mimeType,omitempty"`
	Text      string `json:"text,omitempty"`
	BlobBytes *int   `json:"blobBytes,omitempty"`
}

func readResourceTool(ctx context.Context, s *mcpvisor.Supervisor, args json.RawMessage) (any, error) {
	var a resourceArgs
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	res, err := s.Resources().Read(ctx, a.Server, a.URI)
	if err != nil {
		return nil, err
	}
	out := readOutput{Contents: make([]contentItem, 0, len(res.Contents))}
	for _, c := range res.Contents {
		item := contentItem{URI: c.URI, MimeType: c.MimeType, Text: c.Text}
		if c.Blob != "" {
			n := base64.StdEncoding.DecodedLen(len(c.Blob))
			if raw, err := base64.StdEncoding.DecodeString(c.Blob); err == nil {
				n = len(raw)
			}
			kind := "binary data"
			if c.MimeType != "" {
				kind = c.MimeType + " data"
			}
			item.Text = fmt.Sprintf("[%s, %d bytes, not shown]", kind, n)
			item.BlobBytes = &n
		}
		out.Contents = append(out.Contents, item)
	}
	return out, nil
}

// subscribeOutput is the output of SubscribeMcpResource and
// SubscribePolling.
type subscribeOutput struct {
	Subscribed     bool   `json:"subscribed"`
	SubscriptionID string `json:"subscriptionId"`
}

// unsubscribeOutput is the output of UnsubscribeMcpResource and
// UnsubscribePolling: whether a subscription ended.
type unsubscribeOutput struct {
	Unsubscribed bool `json:"unsubscribed"`
}

// subscribeResource serves SubscribeMcpResource. The same resource
// subscribed again keeps its id.
func (m *mgmt) subscribeResource(ctx context.Context, s *mcpvisor.Supervisor, args json.RawMessage) (any, error) {
	var a resourceArgs
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := s.Resources().Subscribe(ctx, a.Server, a.URI); err != nil {
		return nil, err
	}
	key := resourceSub{a.Server, a.URI}
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byKey[key]
	if !ok {
		m.next++
		id = "resource-" + strconv.Itoa(m.next)
		m.byKey[key], m.byID[id] = id, key
	}
	return subscribeOutput{Subscribed: true, SubscriptionID: id}, nil
}

// unsubscribeArgs is UnsubscribeMcpResource's input.
type unsubscribeArgs struct {
	Server         string `json:"server"`
	URI            string `json:"uri"`
	SubscriptionID string `json:"subscriptionId"`
}

// unsubscribeResource serves UnsubscribeMcpResource: by subscriptionId,
// or by server and uri. A subscription that does not exist is
// {unsubscribed: false}.
func (m *mgmt) unsubscribeResource(ctx context.Context, s *mcpvisor.Supervisor, args json.RawMessage) (any, error) {
	var a unsubscribeArgs
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	key := resourceSub{a.Server, a.URI}
	m.mu.Lock()
	if a.SubscriptionID != "" {
		k, ok := m.byID[a.SubscriptionID]
		if !ok || (a.Server != "" && a.Server != k.server) || (a.URI != "" && a.URI != k.uri) {
			m.mu.Unlock()
			return unsubscribeOutput{}, nil
		}
		key = k
	}
	m.mu.Unlock()
	if key.server == "" || key.uri == "" {
		return nil, fmt.Errorf("give subscriptionId, or server and uri")
	}
	subscribed := false
	for _, u := range s.Resources().Subscriptions(key.server) {
		subscribed = subscribed || u == key.uri
	}
	if !subscribed {
		return unsubscribeOutput{}, nil
	}
	if err := s.Resources().Unsubscribe(ctx, key.server, key.uri); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if id, ok := m.byKey[key]; ok {
		delete(m.byKey, key)
		delete(m.byID, id)
	}
	m.mu.Unlock()
	return unsubscribeOutput{Unsubscribed: true}, nil
}
