package protocol

// Method names, client to server.
const (
	MethodInitialize             = "initialize"
	MethodDiscover               = "server/discover"
	MethodPing                   = "ping"
	MethodToolsList              = "tools/list"
	MethodToolsCall              = "tools/call"
	MethodResourcesList          = "resources/list"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodResourcesRead          = "resources/read"
	MethodResourcesSubscribe     = "resources/subscribe"
	MethodResourcesUnsubscribe   = "resources/unsubscribe"
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodCompletionComplete     = "completion/complete"
	MethodLoggingSetLevel        = "logging/setLevel"
	MethodSubscriptionsListen    = "subscriptions/listen"
)

// Method names, server to client.
const (
	MethodRootsList             = "roots/list"
	MethodSamplingCreateMessage = "sampling/createMessage"
	MethodElicitationCreate     = "elicitation/create"
)

// Notification names, either direction.
const (
	NotificationInitialized          = "notifications/initialized"
	NotificationCancelled            = "notifications/cancelled"
	NotificationProgress             = "notifications/progress"
	NotificationMessage              = "notifications/message"
	NotificationToolsListChanged     = "notifications/tools/list_changed"
	NotificationResourcesListChanged = "notifications/resources/list_changed"
	NotificationPromptsListChanged   = "notifications/prompts/list_changed"
	NotificationResourceUpdated      = "notifications/resources/updated"
	NotificationRootsListChanged     = "notifications/roots/list_changed"
	NotificationSubscriptionsAck     = "notifications/subscriptions/acknowledged"
	notificationElicitationComplete  = "notifications/elicitation/complete"

	// Claude Code's channel extension (capability experimental["claude/channel"]).
	NotificationChannel                  = "notifications/claude/channel"
	NotificationChannelPermissionRequest = "notifications/claude/channel/permission_request"
	NotificationChannelPermission        = "notifications/claude/channel/permission"
)
