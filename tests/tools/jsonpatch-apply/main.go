// jsonpatch-apply applies RFC 6902 patches with gopkg.in/evanphx/json-patch.v4, the library
// kube-apiserver uses to apply the patches mutating webhooks return. outfit's tests use it as the
// independent implementation that checks outfit's patches.
//
// Input: one JSON object per line, {"doc": <document>, "patch": [<operations>]}.
// Output: one line per input line: the patched document, or {"error": "<message>"}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

type request struct {
	Doc   json.RawMessage `json:"doc"`
	Patch json.RawMessage `json:"patch"`
}

func apply(line []byte) ([]byte, error) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, fmt.Errorf("bad request line: %w", err)
	}
	patch, err := jsonpatch.DecodePatch(req.Patch)
	if err != nil {
		return nil, fmt.Errorf("decoding patch: %w", err)
	}
	return patch.Apply(req.Doc)
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for scanner.Scan() {
		result, err := apply(scanner.Bytes())
		if err != nil {
			msg, _ := json.Marshal(map[string]string{"error": err.Error()})
			result = msg
		}
		out.Write(result)
		out.WriteByte('\n')
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "reading stdin:", err)
		os.Exit(1)
	}
}
