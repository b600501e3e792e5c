package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRAGClientsEmbedAndRerankOffline drives the clients of a
// retrieval application (e2e/py/rag_clients.py) through tollgate serve to
// the mock: langchain-openai's OpenAIEmbeddings embedding 120 documents 50
// at a time and a query, as token arrays (its default, counted offline
// with the tiktoken encoding litellm ships) and as texts; the litellm SDK's
// embedding (its OpenAI provider) and rerank (its Cohere and hosted vLLM
// providers). Each
// gets the vectors Tollgate answers for what it sent, nothing reaches any
// other host, and every call is one answered usage record.
func TestRAGClientsEmbedAndRerankOffline(t *testing.T) {
	t.Parallel()
	py := needPythonPackage(t, "langchain-openai")
	needPythonPackage(t, "litellm")
	tg := startTollgate(t, withEveryKind(configFor(newMockOpenAI(t).URL)), "")
	secret := tg.newAccount(t, "rag-clients@example.com", "10")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "rag_clients.py")
	cmd.Dir = "py"
	cmd.Env = append(os.Environ(), "TOLLGATE_BASE_URL="+tg.BaseURL, "TOLLGATE_KEY="+secret)
	for env, model := range kindModels {
		cmd.Env = append(cmd.Env, env+"="+model)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "rag_clients.py: %s", stderr.String())
	require.Equal(t, 7, runMatrixLines(t, out), "every scenario reported: %s", stderr.String())
	// langchain: three batches and a check of each way it sends
	// documents, and a query; litellm: an embedding and its check, and a
	// rerank through each of two providers.
	requireAnsweredCalls(t, tg, tg.onlyKeyID(t, "rag-clients@example.com"), map[string]int{"embed": 4 + 1 + 4 + 2, "rerank": 2})
}
