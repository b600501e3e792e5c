package dashboard

import (
	"net/http"
	"regexp"
	"strings"
)

// Code to paste: how a key is used from Python, JavaScript and curl with
// the API's base URL, and from Claude Code (Anthropic's Messages API, at
// the same host without /v1). The secret is written in only on the page that
// shows it once; elsewhere the code reads it from TOLLGATE_API_KEY.

// snippets are the code blocks a page shows.
type snippets struct {
	BaseURL, Model           string
	Python, JavaScript, Curl string
	// ClaudeCode is the shell lines that point Claude Code (and
	// Anthropic's SDKs, which read the same variables) at Tollgate.
	ClaudeCode string
}

// safeHost is a Host header fit to be written into code: a name or an
// address and a port, nothing a shell or a string would read otherwise.
var safeHost = regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$`)

// baseURL is the API's base URL as clients reach it: the operator's
// dashboard.public_base_url, or the scheme and host this page was reached
// at, plus /v1.
func (d *Dashboard) baseURL(r *http.Request) string {
	if u := d.config().Dashboard.PublicBaseURL; u != "" {
		return u
	}
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	host := r.Host
	if !safeHost.MatchString(host) {
		host = "tollgate.example.com" // a Host header no code should carry
	}
	return scheme + "://" + host + "/v1"
}

// snippetsFor are the code blocks for the key with secret ("" to read
// it from the environment), calling model.
func (d *Dashboard) snippetsFor(r *http.Request, secret, model string) snippets {
	base := d.baseURL(r)
	if model == "" {
		model = "MODEL"
	}
	py, js, sh := `os.environ["TOLLGATE_API_KEY"]`, "process.env.TOLLGATE_API_KEY", "$TOLLGATE_API_KEY"
	pyImport := "import os\n"
	if secret != "" {
		py, js, sh, pyImport = `"`+secret+`"`, `"`+secret+`"`, secret, ""
	}
	return snippets{
		BaseURL: base,
		Model:   model,
		Python: pyImport + "from openai import OpenAI\n\n" +
			"client = OpenAI(base_url=\"" + base + "\", api_key=" + py + ")\n" +
			"reply = client.chat.completions.create(\n" +
			"    model=\"" + model + "\",\n" +
			"    messages=[{\"role\": \"user\", \"content\": \"Hello\"}],\n)\n" +
			"print(reply.choices[0].message.content)\n",
		JavaScript: "import OpenAI from \"openai\";\n\n" +
			"const client = new OpenAI({ baseURL: \"" + base + "\", apiKey: " + js + " });\n" +
			"const reply = await client.chat.completions.create({\n" +
			"  model: \"" + model + "\",\n" +
			"  messages: [{ role: \"user\", content: \"Hello\" }],\n});\n" +
			"console.log(reply.choices[0].message.content);\n",
		ClaudeCode: "export ANTHROPIC_BASE_URL=\"" + strings.TrimSuffix(base, "/v1") + "\"\n" +
			"export ANTHROPIC_API_KEY=\"" + sh + "\"\n" +
			"claude\n",
		Curl: "curl " + base + "/chat/completions \\\n" +
			"  -H \"Authorization: Bearer " + sh + "\" \\\n" +
			"  -H \"Content-Type: application/json\" \\\n" +
			"  -d '{\"model\": \"" + strings.ReplaceAll(model, "'", "") + "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}'\n",
	}
}

// firstModel is the first model a key may call: of its allow-list, or of
// the account's plan; "" when there is none.
func (d *Dashboard) firstModel(plan string, allowed []string) string {
	if len(allowed) > 0 {
		return allowed[0]
	}
	if c := modelChoices(d.config(), plan, keyForm{}); len(c) > 0 {
		return c[0].ID
	}
	return ""
}
