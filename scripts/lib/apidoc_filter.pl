#!/usr/bin/perl
# Doxygen's input filter for the API reference (docs/api/Doxyfile; scripts/apidoc.sh runs
# doxygen): doxygen calls it with the path of one input file and reads the file, adapted, from
# its output. Every line stays on its line, so doxygen's warnings name the file's own lines.
#
# Public headers (*.h): the inline namespace `recap::v0` (recap/version.h says why there is one)
# is left out, so that the reference names everything `recap::X`, as code does. Its two lines,
# `inline namespace v0 {` and `}  // namespace v0` (clang-format keeps them exactly so), become
# empty lines.
#
# Markdown pages (docs/*.md, docs/api/mainpage.md) are written for GitHub, whose Markdown
# doxygen 1.9.4 reads differently in three ways; each is translated here, so that the pages
# stay as GitHub shows them and the reference shows the same:
#
#   * Headings. GitHub gives every heading an anchor (its text in lower case, punctuation
#     dropped, spaces as '-'); doxygen gives one only to a heading that says `{#label}`, and
#     its labels are shared by all pages. So each heading below the page's title gets
#     `{#<page>_<anchor>}`, its anchor made as GitHub makes it (a repeated one with -1, -2 …),
#     and links follow: `(#anchor)` becomes `(#<page>_anchor)` and `(other.md#anchor)`
#     `(#other_anchor)`. A link to an anchor no heading has is then a warning of doxygen's.
#   * Links out of docs/ into the repository (`../examples/…`, `../README.md`) have no page in
#     the reference: such a link becomes its path, as code.
#   * Code spans. Inside `…` doxygen still reads some of its commands and quotes (`\u00`, `@x`,
#     `%s`, a `'`, a `"`, `--`), so a span becomes <tt>…</tt> with those characters escaped.
#
# Fenced code blocks are left as they are.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));

my $path = $ARGV[0] // die "apidoc_filter.pl: give the file to filter\n";
open(my $in, '<', $path) or die "apidoc_filter.pl: cannot read $path: $!\n";

if ($path !~ /\.md$/) {
  while (my $line = <$in>) {
    $line =~ s/^inline namespace v0 \{$//;
    $line =~ s/^\}  \/\/ namespace v0$//;
    print $line;
  }
  exit 0;
}

# A page's labels start with its file's name: "checkpoint-format.md" -> "checkpoint_format".
sub page_of {
  my ($file) = @_;
  $file =~ s{.*/}{};
  $file =~ s/\.md$//;
  $file =~ s/[^A-Za-z0-9]/_/g;
  return $file;
}

# The anchor GitHub gives a heading: its text (a link as its text) in lower case, what is
# neither a letter, a mark, a digit, a space, '-' nor '_' dropped, spaces as '-'.
sub anchor_of {
  my ($text) = @_;
  $text =~ s/!?\[([^\]]*)\]\([^)]*\)/$1/g;
  $text = lc $text;
  $text =~ s/[^\p{L}\p{M}\p{N}\p{Pc} -]//g;
  $text =~ s/ /-/g;
  return $text;
}

my $page = page_of($path);
(my $dir = $path) =~ s{/[^/]*$}{};
$dir = '.' if $dir eq $path;

# Where a relative link goes, from the checkout's root ("docs/cli.md", "README.md"), or undef
# when it leaves the checkout. The root is the folder that holds docs/, where this page is.
sub target_of {
  my ($link) = @_;
  my @at;
  for my $p (split m{/}, "$dir/$link") {
    if ($p eq '..') { pop @at; } elsif ($p ne '.' && $p ne '') { push @at, $p; }
  }
  my @d = grep { $_ ne '' && $_ ne '.' } split m{/}, $dir;
  my ($k) = grep { $d[$_] eq 'docs' } reverse 0 .. $#d;
  return undef unless defined $k;
  my @root = @d[0 .. $k - 1];
  return undef if @at <= @root || join('/', @at[0 .. $#root]) ne join('/', @root);
  return join('/', @at[scalar(@root) .. $#at]);
}

# Rewrites the links of text outside code spans.
sub links {
  my ($text) = @_;
  $text =~ s{\]\(#([^)\s]+)\)}{](#${page}_$1)}g;
  $text =~ s{(\[[^\]]*\])\(([^)\s:#]+)(?:#([^)\s]+))?\)}{
    my ($label, $link, $anchor) = ($1, $2, $3);
    my $at = target_of($link);
    if (!defined $at) {
      "$label($link" . (defined $anchor ? "#$anchor" : '') . ')';
    } elsif ($at =~ m{^docs/(?:[^/]+/)*([^/]+)\.md$}) {
      # A page of the reference: by its heading's label, or by its file (doxygen finds it).
      defined $anchor ? "$label(#" . page_of($1) . "_$anchor)" : "$label($link)";
    } elsif ($at =~ m{^docs/}) {
      "$label($link)";    # an image or another file of docs/
    } else {
      (my $bare = substr($label, 1, -1)) =~ s/`//g;
      $bare eq $at ? "`$at`" : substr($label, 1, -1) . " (`$at`)";
    }
  }ge;
  return $text;
}

# A code span, so that doxygen shows it literally. One without the characters doxygen reads
# inside spans (quotes, `\`, `@`, `#`, `%`, `&`, `<`, `>`, `|`, `--`) stays a span: doxygen
# keeps `*` and `_` in it as they are. Another becomes <tt>…</tt> with those escaped (`\|` is a
# table's escaped '|', and stays one), and `*` and `_` too where they could start emphasis.
sub code {
  my ($ticks, $body) = @_;
  return "$ticks$body$ticks" if $body !~ /['"\\@#%&<>|]|--/;
  return tt($body);
}

# A code span's text as <tt>…</tt>, escaped (see code).
sub tt {
  my ($body) = @_;
  $body =~ s/^ (.*) $/$1/s;
  $body =~ s/\\\|/\x00/g;
  $body =~ s/([\\@#%"*])/\\$1/g;
  $body =~ s/_(?=[\x00-\x2F\x3A-\x40\x5B-\x5E\x60\x7B-\x7F]|$)/\\_/g;
  $body =~ s/&/&amp;/g;
  $body =~ s/</&lt;/g;
  $body =~ s/>/&gt;/g;
  $body =~ s/-(?=-)/-\\/g;
  $body =~ s/\x00/\\|/g;
  return "<tt>$body</tt>";
}

# A block of text lines (a paragraph, a list, a table): code spans, then links around them.
# Doxygen shows a link's text as it is, backticks and tags too: a code span there loses its
# backticks.
sub block {
  my ($text) = @_;
  $text =~ s{\[((?:[^\]`]|`[^`]+`)*`[^`]+`(?:[^\]`]|`[^`]+`)*)\](?=\()}{
    (my $label = $1) =~ s/`([^`]+)`/$1/g;
    "[$label]";
  }ge;
  my @pieces = split /((?<!`)`+(?!`))/, $text, -1;
  my $out = '';
  my $i = 0;
  while ($i < @pieces) {
    my $p = $pieces[$i];
    if ($i % 2 == 1) {
      # A run of backticks: a code span when the same run closes it further on.
      my $j = $i + 2;
      $j += 2 while $j < @pieces && $pieces[$j] ne $p;
      if ($j < @pieces) {
        $out .= code($p, join('', @pieces[$i + 1 .. $j - 1]));
        $i = $j + 1;
        next;
      }
      $out .= $p;
    } else {
      $out .= links($p);
    }
    $i++;
  }
  return $out;
}

my $fence = '';    # the fence of the code block we are in, or ''
my %seen;          # anchors given on this page so far, for GitHub's -1, -2 suffixes
my $pending = '';  # the lines of the block being read
while (my $line = <$in>) {
  if ($fence ne '') {
    $fence = '' if $line =~ /^\s*\Q$fence\E\s*$/;
    print $line;
    next;
  }
  # A heading (below the title) that has no label of its own yet.
  my ($hashes, $title) = $line =~ /^(#{2,6})\s+(.*?)\s*#*\s*$/;
  my $heading = defined $hashes && $line !~ /\{#[^}]*\}\s*$/;
  if ($line =~ /^\s*(```+|~~~+)/ || $line =~ /^\s*$/ || $heading) {
    print block($pending);
    $pending = '';
  }
  if ($line =~ /^\s*(```+|~~~+)/) {
    $fence = $1;
    print $line;
  } elsif ($heading) {
    my $anchor = anchor_of($title);
    my $n = $seen{$anchor}++;
    $anchor .= "-$n" if $n;
    chomp(my $text = block($title));
    print "$hashes $text {#${page}_$anchor}\n";
  } elsif ($line =~ /^\s*$/) {
    print $line;
  } else {
    $pending .= $line;
  }
}
print block($pending);
