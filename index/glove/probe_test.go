package glove

// The paraphrase probe: 20 hand-written pairs, each text a rewording of its
// partner with few shared content words. MRR ranks each text's partner among
// all texts of the other side, both directions.
var probePairs = [][2]string{
	{"the deployment failed last night", "our release broke yesterday evening"},
	{"I love baking chocolate cake", "making desserts in the oven is my favourite hobby"},
	{"my daughter started school this week", "our kid just began her first classes"},
	{"the server is running out of memory", "the machine keeps exhausting its ram"},
	{"we are moving to a new apartment next month", "we relocate to another flat soon"},
	{"she adopted a puppy from the shelter", "they got a young dog from the animal rescue"},
	{"the flight to paris was delayed by three hours", "our plane to france left late"},
	{"I'm training for a marathon", "I've been running long distances to prepare for the race"},
	{"the database query is too slow", "fetching records from sql takes forever"},
	{"he lost his job at the factory", "he was laid off from the plant"},
	{"I painted a sunset over the lake", "my artwork shows the evening sky above the water"},
	{"we went camping in the mountains", "we spent the weekend in a tent on a hiking trip"},
	{"the doctor said my blood pressure is high", "my physician warned me about hypertension"},
	{"can you fix the login bug", "please repair the authentication error"},
	{"my grandmother passed away last year", "my grandma died recently"},
	{"I'm learning to play the guitar", "I've been taking music lessons for strings"},
	{"the company's revenue grew this quarter", "the firm's sales increased recently"},
	{"it rained all day so the game was cancelled", "the match was called off because of the storm"},
	{"I volunteer at a homeless shelter", "I help people living on the street as a volunteer"},
	{"she is studying psychology at university", "she attends college to become a counselor"},
}

// probeDistractors share a word with some probe text but not its meaning:
// they are ranked with the partners, so word overlap alone does not win.
var probeDistractors = []string{
	"the army deployment to the border was announced",
	"the new chocolate factory opened downtown",
	"school buses run every morning",
	"the memory of my childhood home",
	"the apartment building has a new elevator",
	"the animal shelter needs more funding",
	"paris is the capital of france",
	"the race for mayor is getting close",
	"the query letter to the publisher was rejected",
	"the factory produces car parts",
	"the lake froze over in winter",
	"mountain bikes are expensive",
	"the blood bank needs donors",
	"a bug landed on my arm",
	"my grandmother's recipe for soup",
	"the guitar store closed",
	"the quarter coin was found under the sofa",
	"the game console sold out",
	"the street was closed for a parade",
	"the university library opens at eight",
}

// probeMRR embeds the probe with cfg and returns the mean reciprocal rank.
func probeMRR(m *Model, cfg embedConfig) float64 {
	n := len(probePairs)
	a := make([][]float32, n)
	b := make([][]float32, n)
	for i, p := range probePairs {
		a[i] = m.embed(p[0], cfg)
		b[i] = m.embed(p[1], cfg)
	}
	neg := make([][]float32, len(probeDistractors))
	for i, t := range probeDistractors {
		neg[i] = m.embed(t, cfg)
	}
	var sum float64
	for _, side := range [2][2][][]float32{{a, b}, {b, a}} {
		q, d := side[0], side[1]
		for i := range q {
			want := dot(q[i], d[i])
			rank := 1
			for j := range d {
				if j != i && dot(q[i], d[j]) > want {
					rank++
				}
			}
			for _, v := range neg {
				if dot(q[i], v) > want {
					rank++
				}
			}
			sum += 1 / float64(rank)
		}
	}
	return sum / float64(2*n)
}

func dot(a, b []float32) float32 {
	var s float32
	for k := range a {
		s += a[k] * b[k]
	}
	return s
}
