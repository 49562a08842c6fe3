package evidence

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// With the key, each bundle is sealed with its namespace and key name: neither an
// edit nor a bundle moved under another restart's name verifies (docs/alerts.md, "Evidence").

// Integrity is what reading a bundle back found of its seal.
type Integrity string

const (
	IntegritySealed    Integrity = "sealed"      // the seal verifies under the key
	IntegrityBroken    Integrity = "seal-broken" // the seal does not verify
	IntegrityUnsealed  Integrity = "unsealed"    // no seal
	IntegrityUnchecked Integrity = "unchecked"   // sealed, read without the key
)

// Integrities says, for people, what each Integrity means (history shows it).
var Integrities = map[Integrity]string{
	IntegritySealed:    "sealed with this watchdog's key (--outbox-key): saved as shown",
	IntegrityBroken:    "SEAL DOES NOT VERIFY: edited since it was saved, moved under another name, written by someone else, or sealed under another key; do not trust it",
	IntegrityUnsealed:  "not sealed: saved by a run without --outbox-key (or before bundles were sealed), or written by someone else",
	IntegrityUnchecked: "sealed, not checked: give --outbox-key (WATCHDOG_OUTBOX_KEY) to check it",
}

const sealPrefix = "hmac-sha256:"

// envelope is a sealed bundle as saved, the bundle's bytes exactly as sealed.
type envelope struct {
	Seal   string          `json:"seal"`
	Bundle json.RawMessage `json:"bundle"`
}

func seal(key []byte, ns, name string, raw []byte) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "agentenv-watchdog evidence v1\n%s\n%s\n", ns, name)
	mac.Write(raw)
	return sealPrefix + hex.EncodeToString(mac.Sum(nil))
}

// Open decodes a saved bundle (key name in the ConfigMap in ns) and checks its seal under key.
func Open(key []byte, ns, name string, value []byte) (Bundle, error) {
	var e envelope
	if err := json.Unmarshal(value, &e); err != nil || len(e.Bundle) == 0 {
		e = envelope{Bundle: value} // a bundle saved without an envelope
	}
	var b Bundle
	if err := json.Unmarshal(e.Bundle, &b); err != nil {
		return b, err
	}
	switch {
	case e.Seal == "":
		b.Integrity = IntegrityUnsealed
	case len(key) == 0:
		b.Integrity = IntegrityUnchecked
	case hmac.Equal([]byte(e.Seal), []byte(seal(key, ns, name, e.Bundle))):
		b.Integrity = IntegritySealed
	default:
		b.Integrity = IntegrityBroken
	}
	return b, nil
}
