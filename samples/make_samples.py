#!/usr/bin/env python3
"""Generate samples/tiny.jsonl: ~200 short English documents for demos and tiny-GPT training.

The text is original and produced from the templates and word lists below with a
fixed seed, so the file is reproducible byte for byte:

    python3 samples/make_samples.py            # writes samples/tiny.jsonl
    python3 samples/make_samples.py --check    # exits 1 if the file is out of date

Each document is a small story, letter, note or description built from a few
hundred words with plenty of repetition, which is what a very small model can learn.
"""
import json
import os
import random
import sys

SEED = 20261202
N_DOCS = 200

NAMES = ["Anna", "Ben", "Clara", "David", "Elsa", "Felix", "Greta", "Hugo", "Ida", "Jonas",
         "Kira", "Leo", "Mara", "Nils", "Olga", "Paul", "Rosa", "Sam", "Tilda", "Victor"]
JOBS = ["baker", "fisherman", "teacher", "carpenter", "gardener", "lighthouse keeper",
        "librarian", "potter", "shepherd", "clockmaker", "painter", "miller"]
PLACES = ["a small village by the sea", "a quiet town in the hills", "a farm at the edge of the forest",
          "a narrow street near the old harbour", "a house beside the river", "a cottage under the mountain",
          "a busy market town", "an island with one road"]
TIMES = ["early in the morning", "at noon", "in the late afternoon", "just before sunset",
         "after supper", "on a cold winter night", "on the first day of spring", "one rainy Sunday"]
WEATHER = ["The sky was clear and blue.", "A soft rain was falling.", "The wind came in from the sea.",
           "Snow covered the roofs and the fields.", "The air was warm and still.",
           "Grey clouds hung low over the hills.", "The sun was bright but the air was cold.",
           "A thick fog lay on the water."]
OBJECTS = ["a wooden box", "an old map", "a blue cup", "a brass key", "a letter with no name",
           "a basket of apples", "a small lamp", "a broken clock", "a red scarf", "a book of songs",
           "a loaf of warm bread", "a pair of boots"]
ANIMALS = ["a grey cat", "an old dog", "a white goat", "a little owl", "a brown horse", "a flock of geese"]
FEELINGS = ["happy", "tired", "curious", "worried", "calm", "surprised", "proud", "sleepy"]
ACTIONS = ["opened the window", "lit the stove", "made a pot of tea", "swept the floor",
           "walked down to the water", "fed the animals", "mended the fence", "wrote in a notebook",
           "counted the coins in the jar", "sang an old song", "baked bread for the neighbours",
           "read by the fire"]
LESSONS = ["Small things done every day add up to great things.",
           "A kind word costs nothing and is worth a great deal.",
           "It is better to ask than to guess.",
           "Good work takes time, and time is never wasted on good work.",
           "Friends are found in the places where you help.",
           "The sea gives and the sea takes, so the wise keep a full store.",
           "What you mend with care will last longer than what you buy in haste.",
           "Every road is shorter when you walk it with a friend."]
SEASONS = ["spring", "summer", "autumn", "winter"]
FOODS = ["soup", "bread", "apples", "cheese", "fish", "honey", "plums", "potatoes"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "ten", "twelve"]


def story(r):
    a, b = r.sample(NAMES, 2)
    job = r.choice(JOBS)
    place = r.choice(PLACES)
    obj = r.choice(OBJECTS)
    animal = r.choice(ANIMALS)
    s = [f"Once there was a {job} named {a} who lived in {place}."]
    x, y = r.sample(ACTIONS, 2)
    s.append(f"Every day {a} {x} and then {y}.")
    s.append(f"{a} had {animal} that followed {a} everywhere.")
    s.append(f"{r.choice(TIMES).capitalize()}, {a} found {obj} near the door.")
    s.append(r.choice(WEATHER))
    s.append(f'"Where did this come from?" {a} asked. The {animal.split()[-1]} did not answer.')
    s.append(f"{a} felt {r.choice(FEELINGS)}, so {a} went to see {b}, the {r.choice(JOBS)}.")
    s.append(f'{b} looked at the {obj.split(" ", 1)[1]} for a long time and said, "I have seen this before. '
             f'It belongs to the {r.choice(JOBS)} who lives in {r.choice(PLACES)}."')
    s.append(f"The next day {a} and {b} walked for {r.choice(NUMBERS)} hours to return it.")
    s.append(f"When they arrived, the owner was so {r.choice(['happy', 'grateful', 'surprised'])} "
             f"that they shared {r.choice(FOODS)} and {r.choice(FOODS)} with them.")
    s.append(f"{a} {r.choice(ACTIONS)} that night and felt {r.choice(FEELINGS)}.")
    s.append(r.choice(LESSONS))
    return " ".join(s)


def letter(r):
    a, b = r.sample(NAMES, 2)
    season = r.choice(SEASONS)
    paras = [f"Dear {b},",
             f"I hope this letter finds you well. Here in {r.choice(PLACES)} the {season} has been "
             f"{r.choice(['long', 'short', 'gentle', 'hard', 'wet', 'dry'])}. {r.choice(WEATHER)}",
             "This week I {} and I {}.".format(*r.sample(ACTIONS, 2)) + f" On Tuesday I found "
             f"{r.choice(OBJECTS)} in the garden, and I still do not know who left it there. "
             f"The {r.choice(ANIMALS).split()[-1]} is well and sends you greetings.",
             f"We have {r.choice(NUMBERS)} baskets of {r.choice(FOODS)} in the cellar, so we will not be "
             f"hungry this {season}. Please come and visit when the roads are good.",
             f"{r.choice(LESSONS)} I think of that often.",
             f"With love,\n{a}"]
    return "\n\n".join(paras)


def note(r):
    job = r.choice(JOBS)
    items = r.sample(ACTIONS, 4)
    lines = [f"Notes of the {job}, {r.choice(SEASONS)}.", ""]
    for i, it in enumerate(items, 1):
        lines.append(f"{i}. Today I {it}.")
    lines.append("")
    lines.append(f"Need to buy: {', '.join(r.sample(FOODS, 3))} and {r.choice(OBJECTS)}.")
    lines.append(f"Remember: {r.choice(LESSONS)}")
    return "\n".join(lines)


def describe(r):
    place = r.choice(PLACES)
    s = [f"This is a description of {place}."]
    s.append(f"In {r.choice(SEASONS)} {r.choice(WEATHER).lower()}")
    s.append(f"There are {r.choice(NUMBERS)} houses, a {r.choice(JOBS)}'s workshop and a well.")
    s.append(f"People grow {r.choice(FOODS)} and {r.choice(FOODS)}, and they keep {r.choice(ANIMALS)}.")
    s.append(f"Visitors come {r.choice(TIMES)} to buy {r.choice(FOODS)} and to see the old "
             f"{r.choice(['bridge', 'tower', 'mill', 'church', 'lighthouse', 'market hall'])}.")
    s.append(f"The children like to {r.choice(['run by the water', 'climb the trees', 'help at the market', 'listen to stories'])}.")
    s.append(r.choice(LESSONS))
    return " ".join(s)


def qa(r):
    a = r.choice(NAMES)
    job = r.choice(JOBS)
    food = r.choice(FOODS)
    n = r.randint(2, 12)
    m = r.randint(2, 12)
    return (f"Question: {a} the {job} has {n} baskets of {food} and buys {m} more. How many baskets does {a} have?\n"
            f"Answer: {a} has {n} + {m} = {n + m} baskets of {food}.\n\n"
            f"Question: What does a {job} do {r.choice(TIMES)}?\n"
            f"Answer: A {job} often {r.choice(ACTIONS)} {r.choice(TIMES)}.")


KINDS = [story, story, story, letter, letter, note, describe, describe, qa]


def generate():
    r = random.Random(SEED)
    docs = []
    for i in range(N_DOCS):
        kind = KINDS[i % len(KINDS)]
        # a document is one to three pieces of its kind: lengths vary
        parts = [kind(r) for _ in range(1 + (r.random() < 0.8) + (r.random() < 0.5) + (r.random() < 0.3))]
        docs.append("\n\n".join(parts))
    return "".join(json.dumps({"text": d, "id": f"tiny-{i:04d}"}, ensure_ascii=False) + "\n"
                   for i, d in enumerate(docs))


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny.jsonl")
    data = generate()
    if "--check" in sys.argv[1:]:
        with open(out, encoding="utf-8") as f:
            ok = f.read() == data
        print("up to date" if ok else "tiny.jsonl is out of date: run samples/make_samples.py")
        sys.exit(0 if ok else 1)
    with open(out, "w", encoding="utf-8") as f:
        f.write(data)
    print(f"wrote {out}: {N_DOCS} documents, {len(data.encode())} bytes")


if __name__ == "__main__":
    main()
