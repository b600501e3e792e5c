package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider/schematest"
	"github.com/tollgate/tollgate/internal/testenv"
)

// jsDir holds the JavaScript clients, pinned by its package-lock.json.
const jsDir = "js"

// needNode returns node's path, installing the pinned clients (npm ci)
// when one is missing or not the pinned version. Without Node the test skips, except in CI, where
// it fails.
func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	npm, nerr := exec.LookPath("npm")
	if err != nil || nerr != nil {
		testenv.Need(t, fmt.Sprintf("the JavaScript client matrix needs node and npm (Debian's nodejs and npm): %v %v", err, nerr))
	}
	npmInstall(t, npm, jsDir, 4*time.Minute)
	return node
}

// npmInstalledAsPinned reports whether every dependency dir's package.json
// pins is installed in its node_modules at that version.
func npmInstalledAsPinned(t *testing.T, dir string) bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err)
	var p struct{ Dependencies map[string]string }
	require.NoError(t, json.Unmarshal(raw, &p))
	for name, version := range p.Dependencies {
		if installedNPM(dir, name) != version {
			return false
		}
	}
	return true
}

// TestJavaScriptClientMatrix drives the npm openai SDK and the AI SDK
// (e2e/js/matrix.mjs) through tollgate serve to every provider type of the
// mock: chat, stream, tools (whole, and streamed through each SDK's own
// accumulator) and, where the mock answers it, structured output; and the
// openai SDK's embeddings (its default base64, decoded to the float
// answer) and a streamed legacy completion. Every answer the clients got
// is then held to OpenAI's schema, and every embedding and completion call
// is one answered usage record of its model.
func TestJavaScriptClientMatrix(t *testing.T) {
	t.Parallel()
	node := needNode(t)
	runClientMatrix(t, jsDir, node, "matrix.mjs", matrixShape{
		perModel: 12, kindScenarios: 2, kindCalls: map[string]int{"embed": 2, "instruct": 1},
	})
}

// matrixShape is what a client matrix runs: perModel scenarios for each
// chat model, and kindScenarios more, once each, of the models of the
// other kinds (kindModels), whose calls of each model kindCalls counts.
type matrixShape struct {
	perModel, kindScenarios int
	kindCalls               map[string]int
}

// runClientMatrix runs one language's client matrix (dir/script, by
// interpreter) against tollgate serve with a mock of every provider type
// and a model of every kind: one subtest per scenario line it prints
// ({client, model, scenario, ok, detail}), then every answer it recorded
// held to OpenAI's schema, and the usage records of the calls of the
// models of other kinds, each at its model and answered.
func runClientMatrix(t *testing.T, dir, interpreter, script string, shape matrixShape) {
	t.Helper()
	mocks := map[string]*mockProvider{}
	for _, k := range providerKinds {
		mocks[k.kind] = newMockProvider(t, k.kind)
	}
	tg := startTollgate(t, withEveryKind(providersConfig(mocks)), "")
	secret := tg.newAccount(t, "matrix@example.com", "10")
	var models []string
	for _, k := range providerKinds {
		models = append(models, k.model)
	}
	recordPath := filepath.Join(t.TempDir(), "answers.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"TOLLGATE_BASE_URL="+tg.BaseURL, "TOLLGATE_KEY="+secret, "TOLLGATE_RECORD="+recordPath,
		"TOLLGATE_MODELS="+strings.Join(models, ","),
		"TOLLGATE_STRUCTURED_MODELS=claude-sonnet",
		"TOLLGATE_WANT_TEXT="+mockFullText())
	for env, model := range kindModels {
		cmd.Env = append(cmd.Env, env+"="+model)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s: %s", interpreter, script, stderr.String())
	n := runMatrixLines(t, out)
	require.Equal(t, len(models)*shape.perModel+shape.kindScenarios, n, "every scenario reported: %s", stderr.String())
	requireRecordedAnswersAreOpenAIs(t, recordPath)
	requireAnsweredCalls(t, tg, tg.onlyKeyID(t, "matrix@example.com"), shape.kindCalls)
}

// runMatrixLines makes a subtest of every scenario line a matrix printed
// ({client, model, scenario, ok, detail}): failed with its detail when not
// ok, else logging it. It returns how many there were.
func runMatrixLines(t *testing.T, out []byte) int {
	t.Helper()
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r struct {
			Client, Model, Scenario, Detail string
			OK                              bool
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "%s", sc.Text())
		n++
		t.Run(r.Client+"/"+r.Model+"/"+r.Scenario, func(t *testing.T) {
			if !r.OK {
				t.Errorf("%s", r.Detail)
			} else if r.Detail != "" {
				t.Log(r.Detail)
			}
		})
	}
	require.NoError(t, sc.Err())
	return n
}

// requireRecordedAnswersAreOpenAIs holds every answer a client matrix
// recorded (one JSON line each: url, status, contentType, body), as the
// client got it, to OpenAI's schema.
func requireRecordedAnswersAreOpenAIs(t *testing.T, recordPath string) {
	t.Helper()
	raw, err := os.ReadFile(recordPath)
	require.NoError(t, err, "the matrix records the answers it gets")
	var answers []recordedAnswer
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var a struct {
			URL, ContentType, Body string
			Status                 int
		}
		require.NoError(t, json.Unmarshal(line, &a), "%s", line)
		u, err := url.Parse(a.URL)
		require.NoError(t, err)
		answers = append(answers, recordedAnswer{path: u.Path, contentType: a.ContentType, status: a.Status, body: []byte(a.Body)})
	}
	kinds := map[string]int{}
	for _, a := range answers {
		kinds[strings.Split(a.contentType, ";")[0]]++
	}
	require.Positive(t, kinds["application/json"], "whole answers recorded: %v", kinds)
	require.Positive(t, kinds["text/event-stream"], "streams recorded: %v", kinds)
	for i, a := range answers {
		t.Run(fmt.Sprintf("schema/%d %s", i, a.path), func(t *testing.T) {
			responses := strings.HasSuffix(a.path, "/responses")
			switch {
			case a.status >= 400:
				requireSchema(t, schemaError, a.body)
			case a.status != http.StatusOK:
				t.Fatalf("status %d: %s", a.status, a.body)
			case responses && strings.HasPrefix(a.contentType, "text/event-stream"):
				events := responseEvents(t, a.body)
				require.NotEmpty(t, events)
				for _, ev := range events {
					requireSchema(t, schematest.ResponseEvent, []byte(ev.Raw))
				}
			case responses:
				requireSchema(t, schematest.Response, a.body)
			case strings.HasSuffix(a.path, "/models"):
				requireSchema(t, schematest.ModelList, a.body)
			case strings.HasSuffix(a.path, "/embeddings"):
				requireSchema(t, schematest.Embeddings, floatEmbeddings(t, a.body))
			case strings.HasSuffix(a.path, "/moderations"):
				requireSchema(t, schematest.Moderation, a.body)
			case strings.HasSuffix(a.path, "/chat/completions") && strings.HasPrefix(a.contentType, "text/event-stream"):
				readWireStream(t, bytes.NewReader(a.body))
			case strings.HasSuffix(a.path, "/chat/completions"):
				requireSchema(t, schemaCompletion, a.body)
			case strings.HasSuffix(a.path, "/completions") && strings.HasPrefix(a.contentType, "text/event-stream"):
				for _, ev := range readWireStreamOf(t, bytes.NewReader(a.body), "") {
					if chunk, ok := asCompletionAnswer(t, ev.data); ok {
						requireSchema(t, schematest.TextCompletion, chunk)
					}
				}
			case strings.HasSuffix(a.path, "/completions"):
				requireSchema(t, schematest.TextCompletion, a.body)
			}
		})
	}
}

// asCompletionAnswer is a legacy completion stream's event as the answer
// whose schema OpenAI's spec gives its chunks, or false for an event that
// schema cannot describe. The spec describes an answer: its finish_reason
// is never null and its usage never null, while a stream's chunks but the
// last have a null finish_reason, and with include_usage a null usage
// (as OpenAI's own have, and as its chat chunks' schema allows). So the
// chunks with a finish_reason are held to it, without a null usage.
func asCompletionAnswer(t *testing.T, data string) ([]byte, bool) {
	t.Helper()
	if data == "[DONE]" || strings.HasPrefix(data, `{"error"`) ||
		strings.Contains(gjson.Get(data, "choices.#.finish_reason").Raw, "null") {
		return nil, false
	}
	var chunk map[string]any
	require.NoError(t, json.Unmarshal([]byte(data), &chunk), "%s", data)
	if u, ok := chunk["usage"]; ok && u == nil {
		delete(chunk, "usage")
	}
	out, err := json.Marshal(chunk)
	require.NoError(t, err)
	return out, true
}

// floatEmbeddings is an embeddings answer with every base64 vector
// decoded to its floats, the only form OpenAI's schema describes.
func floatEmbeddings(t *testing.T, body []byte) []byte {
	t.Helper()
	var answer map[string]any
	require.NoError(t, json.Unmarshal(body, &answer), "%s", body)
	data, _ := answer["data"].([]any)
	for _, d := range data {
		item, _ := d.(map[string]any)
		b64, ok := item["embedding"].(string)
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		require.NoError(t, err, "a base64 vector: %q", b64)
		require.Zero(t, len(raw)%4, "float32s: %q", b64)
		floats := make([]float32, len(raw)/4)
		for i := range floats {
			floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		item["embedding"] = floats
	}
	out, err := json.Marshal(answer)
	require.NoError(t, err)
	return out
}

// recordedAnswer is one answer a client of a matrix got.
type recordedAnswer struct {
	path, contentType string
	status            int
	body              []byte
}
