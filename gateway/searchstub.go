//go:build !toolsearch

package gateway

import (
	"context"
	"encoding/json"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

type searchIndex struct{}

func newSearchIndex(*Gateway) *searchIndex { return &searchIndex{} }
func (*searchIndex) stale(string)          {}

func (sm *searchMode) list(pool []mcpvisor.Tool) protocol.ListToolsResult {
	return protocol.ListToolsResult{}
}
func (sm *searchMode) deferredTools(pool []mcpvisor.Tool) []protocol.Tool { return nil }
func (sm *searchMode) call(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request, name string, args json.RawMessage) (any, *protocol.Error, bool) {
	return nil, nil, false
}
