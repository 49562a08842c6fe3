package testenv

import (
	"encoding/json"
	"fmt"

	"github.com/slack-go/slack"
)

// SlackTexts reads an incoming-webhook body back through Slack's own client
// (slack-go) and returns every text object Slack would render: the fallback, the
// header, each section's text and fields, the context elements.
func SlackTexts(body []byte) ([]string, error) {
	var msg slack.WebhookMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("slack-go cannot read the message: %w", err)
	}
	texts := []string{msg.Text}
	if msg.Blocks == nil {
		return texts, nil
	}
	for _, b := range msg.Blocks.BlockSet {
		switch b := b.(type) {
		case *slack.HeaderBlock:
			texts = append(texts, b.Text.Text)
		case *slack.SectionBlock:
			if b.Text != nil {
				texts = append(texts, b.Text.Text)
			}
			for _, f := range b.Fields {
				texts = append(texts, f.Text)
			}
		case *slack.ContextBlock:
			for _, e := range b.ContextElements.Elements {
				if tx, ok := e.(*slack.TextBlockObject); ok {
					texts = append(texts, tx.Text)
				}
			}
		default:
			return nil, fmt.Errorf("a block the watchdog never sends: %T", b)
		}
	}
	return texts, nil
}
