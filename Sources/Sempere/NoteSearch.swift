import Foundation

/// Search over notes (`sempere search`): every word of the query must be in the note, anywhere in it (not on one
/// line, not in order), compared without case or diacritics, as Spotlight and the notes apps search. Each match
/// carries the note's title and the lines that hold a word, each with the line before and after it for context.
/// The notes are searched on every core, in chunks.
public struct NoteSearch: Sendable {
    /// One note that holds every word.
    public struct Match: Sendable, Equatable {
        public let id: String
        public let title: String
        /// The lines around each line that holds a word: runs of (line number from 1, text), in order.
        public let excerpts: [[Excerpt]]
    }

    public struct Excerpt: Sendable, Equatable {
        public let line: Int
        public let text: String
        /// Whether this line holds one of the words (the others are context).
        public let matches: Bool
    }

    /// The words, folded for comparison.
    public let words: [String]

    /// The words of `query`, split at white space; an empty query is refused.
    public init(_ query: String) throws {
        let words = query.split(whereSeparator: \.isWhitespace).map { Self.fold(String($0)) }
        guard !words.isEmpty else {
            throw SempereError(.notFound, "give at least one word to search for")
        }
        self.words = words
    }

    static func fold(_ text: String) -> String {
        text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }

    /// The notes among `notes` (id, title, text) that hold every word, in their order.
    public func matches(in notes: [(id: String, title: String, markdown: String)]) -> [Match] {
        let chunk = 64
        let chunks = (notes.count + chunk - 1) / chunk
        let found = Slots<[Match]>(count: chunks)
        DispatchQueue.concurrentPerform(iterations: chunks) { index in
            let range = (index * chunk)..<min(notes.count, (index + 1) * chunk)
            found.set(index, range.compactMap { match(notes[$0]) })
        }
        return (0..<chunks).flatMap { found.get($0) ?? [] }
    }

    /// The match of one note, or nil when a word is missing from it.
    func match(_ note: (id: String, title: String, markdown: String)) -> Match? {
        let folded = Self.fold(note.markdown)
        guard words.allSatisfy({ folded.contains($0) }) else { return nil }
        let lines = note.markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let hits = lines.indices.filter { index in
            let line = Self.fold(lines[index])
            return words.contains { line.contains($0) }
        }
        // A word holds no white space, so each is on some line: every line with a word, and one line of context
        // either side, overlapping runs merged.
        var runs: [ClosedRange<Int>] = []
        for hit in hits {
            let run = max(0, hit - 1)...min(lines.count - 1, hit + 1)
            if let last = runs.last, run.lowerBound <= last.upperBound + 1 {
                runs[runs.count - 1] = last.lowerBound...max(last.upperBound, run.upperBound)
            } else {
                runs.append(run)
            }
        }
        let hitSet = Set(hits)
        return Match(
            id: note.id, title: note.title,
            excerpts: runs.map { run in
                run.map { Excerpt(line: $0 + 1, text: lines[$0], matches: hitSet.contains($0)) }
            })
    }
}

/// Result slots filled by concurrent jobs, one slot each.
final class Slots<Value: Sendable>: @unchecked Sendable {
    // @unchecked: every access goes through the lock.
    private var slots: [Value?]
    private let lock = NSLock()

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ value: Value) { lock.withLock { slots[index] = value } }
    func get(_ index: Int) -> Value? { lock.withLock { slots[index] } }
}

extension VaultSession {
    /// The notes that hold every word of `query` (``NoteSearch``), newest first.
    public func search(_ query: String) throws -> [NoteSearch.Match] {
        let search = try NoteSearch(query)
        return search.matches(in: try list().notes.map { ($0.id, $0.title, $0.markdown) })
    }
}
