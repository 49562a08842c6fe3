package cli

import (
	"bytes"
	"encoding/json"
	"io"

	"sigs.k8s.io/yaml"
)

// writeJSON writes what write encodes (one JSON object on one line, which a log
// pipeline keeps whole), indented when w is a terminal, where a person reads it.
func writeJSON(w io.Writer, write func(io.Writer) error) error {
	if !isTerminal(w) {
		return write(w)
	}
	var compact, out bytes.Buffer
	if err := write(&compact); err != nil {
		return err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return err
	}
	_, err := w.Write(out.Bytes())
	return err
}

// writeAs writes what write encodes as JSON in format: json (writeJSON) or yaml,
// converted from that JSON so that both have the same fields.
func writeAs(w io.Writer, format string, write func(io.Writer) error) error {
	if format != "yaml" {
		return writeJSON(w, write)
	}
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(b.Bytes())
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

// encodeAs is writeAs of v.
func encodeAs(w io.Writer, format string, v any) error {
	return writeAs(w, format, func(w io.Writer) error { return json.NewEncoder(w).Encode(v) })
}

// textReport is a report a command prints as text, or as JSON or YAML (-o).
type textReport interface {
	WriteText(io.Writer) error
	WriteJSON(io.Writer) error
}

// print writes r in the chosen output format.
func (o *OutputOptions) print(w io.Writer, r textReport) error {
	if o.Structured() {
		return writeAs(w, o.Output, r.WriteJSON)
	}
	return r.WriteText(w)
}
