package views

// AssistantView is /assistant.
type AssistantView struct {
	Layout
	Chat AssistantChatModel
}

// AssistantChatModel is a conversation with the assistant and its form, on the page or
// in the slide-over (Panel).
type AssistantChatModel struct {
	ConversationID string
	Messages       []AssistantMessage
	Panel          bool
}

// AssistantMessage is one line of a conversation.
type AssistantMessage struct {
	Person  bool // written by the person (else by the assistant)
	Body    string
	Choices []AssistantChoice
	Actions []AssistantAction
	// Question is what the choices answer; a choice sends it back, so one clicked after
	// the conversation moved on changes nothing.
	Question int64
	// Spent: the conversation moved on, so the choices are shown (they may be the
	// list the reply gave) but no longer answer.
	Spent bool
}

// AssistantChoice is an answer the person can click: it sends Target.
type AssistantChoice struct {
	Label, Target string
}

// AssistantAction is something the assistant did, linked to what it changed.
type AssistantAction struct {
	Name, Href, Error string
	OK                bool
}
