/* parser.y — the Kiln grammar (bison 3, pure, with locations).
 *
 * Implements the grammar of docs/language.md and builds the AST of ast.h.
 * Locations: every node gets the SrcLoc of its first token, except binary
 * operators (the operator token), ternaries (the '?'), indexing (the '[')
 * and method calls (the method name), which point where a type or shape
 * error is best shown. Expression statements keep the first token of the
 * expression as the statement's loc.
 *
 * Error handling: syntax errors are reported by yyreport_syntax_error below
 * as human messages ("expected ';' after expression", "unexpected '}'",
 * "expected expression before ')'"). LAC makes the expected-token sets
 * exact. Recovery is at statement level (`stmts: stmts error` skips to the
 * next token that can start a statement, e.g. the `let` after a missing ';',
 * or to the block's '}'; a ';' is skipped with the rest) and at declaration
 * level (skip to the next kernel/fn/const), so one file can report several
 * errors; bison stays silent until three tokens have been shifted after a
 * recovery, which keeps cascades out.
 *
 * Example:  kernel k(X: *f32) { store(X, 1.0); }
 *   -> (kernel k (param X *f32) (block (expr (call store X 1.0))))
 */
%require "3.6"
%define api.pure full
%define api.prefix {kiln_yy}
%define api.location.type {SrcLoc}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%lex-param {void *scanner}
%parse-param {void *scanner} {ParseCtx *p}

%code requires {
#include "compiler/lang/parse.h"
}

%code provides {
int kiln_yylex(KILN_YYSTYPE *yylval, SrcLoc *yylloc, void *scanner);
}

%code {
#include <stdio.h>
#include <string.h>

/* A nonterminal's location is its first token's; an empty one takes the
 * location of what precedes it. */
#define YYLLOC_DEFAULT(Cur, Rhs, N)                      \
    do {                                                 \
        if (N) (Cur) = YYRHSLOC(Rhs, 1);                 \
        else (Cur) = YYRHSLOC(Rhs, 0);                   \
    } while (0)

static void kiln_yyerror(SrcLoc *loc, void *scanner, ParseCtx *p, const char *msg);
static AstExpr *leaf(ParseCtx *p, AstExprKind kind, SrcLoc loc);
static AstExpr *make_call(ParseCtx *p, AstExprKind kind, const char *name, AstExpr *lhs,
                          PtrVec *args, SrcLoc loc);
static AstExpr *index_arg(ParseCtx *p, AstExpr *e);
static AstStmt *make_bind(ParseCtx *p, AstStmtKind kind, SrcLoc loc, const char *name,
                          SrcLoc name_loc, int op, AstExpr *value);
static AstStmt *make_for(ParseCtx *p, SrcLoc loc, const char *name, SrcLoc name_loc,
                         AstExpr *lo, AstExpr *hi, AstExpr *step, AstStmt *body);
static AstStmt *make_if(ParseCtx *p, SrcLoc loc, AstExpr *cond, AstStmt *then_body,
                        AstStmt *else_body);
static AstParam *make_param(ParseCtx *p, SrcLoc loc, bool is_const, const char *name,
                            AstType type, AstExpr *def, SrcLoc def_loc);
static AstDecl *make_func(ParseCtx *p, AstDeclKind kind, SrcLoc loc, const char *name,
                          SrcLoc name_loc, PtrVec *params, PtrVec *settings, AstStmt *body);
static PtrVec *push(ParseCtx *p, PtrVec *v, void *x);
static AstDecl *make_import(ParseCtx *p, SrcLoc loc, const char *module, SrcLoc name_loc);
static AstDecl *make_import_as(ParseCtx *p, AstDecl *d, const char *as, SrcLoc as_loc, const char *alias,
                               SrcLoc alias_loc);
static AstDecl *make_module_param(ParseCtx *p, SrcLoc loc, const char *name, SrcLoc name_loc, AstType type);
static void mark_differentiable(ParseCtx *p, AstDecl *d, const char *word, SrcLoc loc);
static AstDecl *make_instance(ParseCtx *p, SrcLoc loc, const char *name, SrcLoc name_loc, const char *of,
                              SrcLoc of_loc, PtrVec *args);
}

%union {
    int64_t ival;
    double fval;
    const char *sval;
    int op;
    AstExpr *expr;
    AstStmt *stmt;
    AstDecl *decl;
    AstArg *arg;
    AstParam *param;
    AstSetting *setting;
    AstType type;
    PtrVec *vec;
    AstTuneItem *titem;
}

%token <ival> INT "number"
%token <fval> FLOAT "float number"
%token <sval> STRING "string"
%token <sval> NAME "identifier"
%token KW_KERNEL "'kernel'" KW_FN "'fn'" KW_CONST "'const'" KW_LET "'let'" KW_VAR "'var'"
%token KW_FOR "'for'" KW_IN "'in'" KW_RANGE "'range'" KW_IF "'if'" KW_ELSE "'else'"
%token KW_RETURN "'return'" KW_WITH "'with'" KW_TRUE "'true'" KW_FALSE "'false'"
%token KW_NONE "'None'"
%token KW_IMPORT "'import'" KW_PARAM "'param'" KW_TUNE "'tune'"
%token SHL "'<<'" SHR "'>>'" LE "'<='" GE "'>='" EQ "'=='" NE "'!='" LAND "'&&'" LOR "'||'"
%token ARROW "'->'"
%token ADD_ASSIGN "'+='" SUB_ASSIGN "'-='" MUL_ASSIGN "'*='" DIV_ASSIGN "'/='"
%token MOD_ASSIGN "'%='" AND_ASSIGN "'&='" OR_ASSIGN "'|='" XOR_ASSIGN "'^='"
%token SHL_ASSIGN "'<<='" SHR_ASSIGN "'>>='"

%right '?' ':'
%left LOR
%left LAND
%left '|'
%left '^'
%left '&'
%left EQ NE
%left '<' LE '>' GE
%left SHL SHR
%left '+' '-'
%left '*' '/' '%'
%precedence UNARY
%precedence '[' '.'

%type <expr> expr primary index_arg
%type <stmt> block stmt if_stmt
%type <decl> decl
%type <arg> arg
%type <param> param
%type <setting> setting
%type <type> type type_opt
%type <vec> stmts args args_opt list_items index_args params params_opt settings settings_opt
%type <expr> default_opt
%type <op> assign_op
%type <vec> tune_items
%type <titem> tune_item

%%

file
    : decls
    ;

decls
    : %empty
    | decls decl            { if ($2) vec_push(p->arena, &p->decls, $2); }
    | decls error           { /* skip to the next kernel/fn/const */ }
    ;

decl
    : KW_KERNEL NAME '(' params_opt ')' settings_opt block
                            { $$ = make_func(p, AST_KERNEL, @1, $2, @2, $4, $6, $7); }
    | KW_KERNEL NAME '=' NAME '(' args_opt ')' ';'
                            { $$ = make_instance(p, @1, $2, @2, $4, @4, $6); }
    | KW_FN NAME '(' params_opt ')' block
                            { $$ = make_func(p, AST_FN, @1, $2, @2, $4, NULL, $6); }
    | KW_CONST NAME '=' expr ';'
                            {
                                $$ = ARENA_NEW(p->arena, AstDecl);
                                $$->kind = AST_CONST;
                                $$->loc = @1;
                                $$->name = $2;
                                $$->name_loc = @2;
                                $$->value = $4;
                            }
    | KW_IMPORT STRING ';'  { $$ = make_import(p, @1, $2, @2); }
    | KW_IMPORT NAME ';'    { $$ = make_import(p, @1, $2, @2); }
    | KW_IMPORT STRING NAME NAME ';'  { $$ = make_import_as(p, make_import(p, @1, $2, @2), $3, @3, $4, @4); }
    | KW_IMPORT NAME NAME NAME ';'    { $$ = make_import_as(p, make_import(p, @1, $2, @2), $3, @3, $4, @4); }
    | KW_PARAM NAME ':' type ';'
                            { $$ = make_module_param(p, @1, $2, @2, $4); }
    | KW_PARAM NAME ':' type NAME ';'
                            { $$ = make_module_param(p, @1, $2, @2, $4);
                              mark_differentiable(p, $$, $5, @5); }
    | KW_TUNE NAME '{' tune_items '}'
                            { $$ = ast_new_tune(p, @1, $2, @2, $4); }
    ;

/* A tune space's items (docs/language.md, "Tune spaces"): `NAME in [v, ...];` is a
 * dimension, `WORD args;` a clause (require, key) that tune_space.c checks by its word. */
tune_items
    : %empty                { $$ = ast_new_vec(p); }
    | tune_items tune_item  { $$ = push(p, $1, $2); }
    ;

tune_item
    : NAME KW_IN '[' list_items ']' ';'
                            { $$ = ast_new_tune_item(p, @1, $1, true, $4); }
    | NAME args ';'         { $$ = ast_new_tune_item(p, @1, $1, false, $2); }
    ;

params_opt
    : %empty                { $$ = ast_new_vec(p); }
    | params
    | params ','
    ;

params
    : param                 { $$ = push(p, ast_new_vec(p), $1); }
    | params ',' param      { $$ = push(p, $1, $3); }
    ;

param
    : NAME type_opt default_opt
                            { $$ = make_param(p, @1, false, $1, $2, $3, @3); }
    | KW_CONST NAME type_opt default_opt
                            { $$ = make_param(p, @1, true, $2, $3, $4, @4); }
    ;

type_opt
    : %empty                { memset(&$$, 0, sizeof $$); }
    | ':' type              { $$ = $2; }
    ;

type
    : NAME                  { $$ = (AstType){ .loc = @1, .name = $1, .is_ptr = false }; }
    | '*' NAME              { $$ = (AstType){ .loc = @1, .name = $2, .is_ptr = true }; }
    | KW_FN                 { $$ = (AstType){ .loc = @1, .name = "fn", .is_ptr = false }; }
    ;

default_opt
    : %empty                { $$ = NULL; }
    | '=' expr              { $$ = $2; }
    ;

settings_opt
    : %empty                { $$ = NULL; }
    | KW_WITH '(' settings ')' { $$ = $3; }
    ;

settings
    : setting               { $$ = push(p, ast_new_vec(p), $1); }
    | settings ',' setting  { $$ = push(p, $1, $3); }
    ;

setting
    : NAME '=' expr         {
                                $$ = ARENA_NEW(p->arena, AstSetting);
                                $$->loc = @1;
                                $$->name = $1;
                                $$->value = $3;
                            }
    ;

block
    : '{' stmts '}'         { $$ = ast_new_block(p, $2, @1); }
    ;

stmts
    : %empty                { $$ = ast_new_vec(p); }
    | stmts stmt            { $$ = push(p, $1, $2); }
    | stmts error           { /* resume at the next token that can start a
                                 * statement, or at the closing '}' */ }
    ;

stmt
    : KW_LET NAME '=' expr ';'  { $$ = make_bind(p, AST_LET, @1, $2, @2, -1, $4); }
    | KW_VAR NAME '=' expr ';'  { $$ = make_bind(p, AST_VAR, @1, $2, @2, -1, $4); }
    | NAME assign_op expr ';'   { $$ = make_bind(p, AST_ASSIGN, @1, $1, @1, $2, $3); }
    | expr ';'                  { $$ = make_bind(p, AST_EXPR, @1, NULL, @1, -1, $1); }
    | KW_RETURN ';'             { $$ = make_bind(p, AST_RETURN, @1, NULL, @1, -1, NULL); }
    | KW_RETURN expr ';'        { $$ = make_bind(p, AST_RETURN, @1, NULL, @1, -1, $2); }
    | KW_FOR NAME KW_IN KW_RANGE '(' expr ')' block
                                { $$ = make_for(p, @1, $2, @2, NULL, $6, NULL, $8); }
    | KW_FOR NAME KW_IN KW_RANGE '(' expr ',' expr ')' block
                                { $$ = make_for(p, @1, $2, @2, $6, $8, NULL, $10); }
    | KW_FOR NAME KW_IN KW_RANGE '(' expr ',' expr ',' expr ')' block
                                { $$ = make_for(p, @1, $2, @2, $6, $8, $10, $12); }
    | if_stmt
    | block
    ;

if_stmt
    : KW_IF expr block                  { $$ = make_if(p, @1, $2, $3, NULL); }
    | KW_IF expr block KW_ELSE block    { $$ = make_if(p, @1, $2, $3, $5); }
    | KW_IF expr block KW_ELSE if_stmt  { $$ = make_if(p, @1, $2, $3, $5); }
    ;

assign_op
    : '='                   { $$ = -1; }
    | ADD_ASSIGN            { $$ = OP_ADD; }
    | SUB_ASSIGN            { $$ = OP_SUB; }
    | MUL_ASSIGN            { $$ = OP_MUL; }
    | DIV_ASSIGN            { $$ = OP_DIV; }
    | MOD_ASSIGN            { $$ = OP_MOD; }
    | AND_ASSIGN            { $$ = OP_BITAND; }
    | OR_ASSIGN             { $$ = OP_BITOR; }
    | XOR_ASSIGN            { $$ = OP_BITXOR; }
    | SHL_ASSIGN            { $$ = OP_SHL; }
    | SHR_ASSIGN            { $$ = OP_SHR; }
    ;

expr
    : primary
    | expr '?' expr ':' expr    { $$ = ast_new_ternary(p, $1, $3, $5, @2); }
    | expr LOR expr             { $$ = ast_new_binary(p, OP_LOR, $1, $3, @2); }
    | expr LAND expr            { $$ = ast_new_binary(p, OP_LAND, $1, $3, @2); }
    | expr '|' expr             { $$ = ast_new_binary(p, OP_BITOR, $1, $3, @2); }
    | expr '^' expr             { $$ = ast_new_binary(p, OP_BITXOR, $1, $3, @2); }
    | expr '&' expr             { $$ = ast_new_binary(p, OP_BITAND, $1, $3, @2); }
    | expr EQ expr              { $$ = ast_new_binary(p, OP_EQ, $1, $3, @2); }
    | expr NE expr              { $$ = ast_new_binary(p, OP_NE, $1, $3, @2); }
    | expr '<' expr             { $$ = ast_new_binary(p, OP_LT, $1, $3, @2); }
    | expr LE expr              { $$ = ast_new_binary(p, OP_LE, $1, $3, @2); }
    | expr '>' expr             { $$ = ast_new_binary(p, OP_GT, $1, $3, @2); }
    | expr GE expr              { $$ = ast_new_binary(p, OP_GE, $1, $3, @2); }
    | expr SHL expr             { $$ = ast_new_binary(p, OP_SHL, $1, $3, @2); }
    | expr SHR expr             { $$ = ast_new_binary(p, OP_SHR, $1, $3, @2); }
    | expr '+' expr             { $$ = ast_new_binary(p, OP_ADD, $1, $3, @2); }
    | expr '-' expr             { $$ = ast_new_binary(p, OP_SUB, $1, $3, @2); }
    | expr '*' expr             { $$ = ast_new_binary(p, OP_MUL, $1, $3, @2); }
    | expr '/' expr             { $$ = ast_new_binary(p, OP_DIV, $1, $3, @2); }
    | expr '%' expr             { $$ = ast_new_binary(p, OP_MOD, $1, $3, @2); }
    | '-' expr %prec UNARY      { $$ = ast_new_unary(p, OP_NEG, $2, @1); }
    | '+' expr %prec UNARY      { $$ = ast_new_unary(p, OP_PLUS, $2, @1); }
    | '!' expr %prec UNARY      { $$ = ast_new_unary(p, OP_NOT, $2, @1); }
    | '~' expr %prec UNARY      { $$ = ast_new_unary(p, OP_BITNOT, $2, @1); }
    | expr '[' index_args ']'   { $$ = make_call(p, AST_INDEX, NULL, $1, $3, @2); }
    | expr '.' NAME '(' args_opt ')'
                                { $$ = make_call(p, AST_METHOD, $3, $1, $5, @3); }
    ;

primary
    : INT                       { $$ = leaf(p, AST_INT, @1); $$->ival = $1; }
    | FLOAT                     { $$ = leaf(p, AST_FLOAT, @1); $$->fval = $1; }
    | STRING                    { $$ = leaf(p, AST_STRING, @1); $$->sval = $1; }
    | KW_TRUE                   { $$ = leaf(p, AST_BOOL, @1); $$->ival = 1; }
    | KW_FALSE                  { $$ = leaf(p, AST_BOOL, @1); $$->ival = 0; }
    | NAME                      { $$ = leaf(p, AST_NAME, @1); $$->sval = $1; }
    | NAME '(' args_opt ')'     { $$ = make_call(p, AST_CALL, $1, NULL, $3, @1); }
    | '(' expr ')'              { $$ = $2; }
    | '[' list_items ']'        { $$ = make_call(p, AST_LIST, NULL, NULL, $2, @1); }
    ;

list_items
    : %empty                    { $$ = ast_new_vec(p); }
    | args
    | args ','
    ;

args_opt
    : %empty                    { $$ = ast_new_vec(p); }
    | args
    | args ','
    ;

args
    : arg                       { $$ = push(p, ast_new_vec(p), $1); }
    | args ',' arg              { $$ = push(p, $1, $3); }
    ;

/* None is a value only as an argument (sum(x, axis = None)) and in an index;
 * anywhere else it is a syntax error naming 'None'. */
arg
    : expr                      { $$ = ast_new_arg(p, NULL, $1, @1); }
    | KW_NONE                   { $$ = ast_new_arg(p, NULL, leaf(p, AST_NONE, @1), @1); }
    | NAME '=' expr             { $$ = ast_new_arg(p, $1, $3, @1); }
    | NAME '=' KW_NONE          { $$ = ast_new_arg(p, $1, leaf(p, AST_NONE, @3), @1); }
    ;

index_args
    : index_arg                 { $$ = push(p, ast_new_vec(p), ast_new_arg(p, NULL, $1, @1)); }
    | index_args ',' index_arg  { $$ = push(p, $1, ast_new_arg(p, NULL, $3, @3)); }
    ;

index_arg
    : ':'                       { $$ = leaf(p, AST_SLICE, @1); }
    | KW_NONE                   { $$ = leaf(p, AST_NONE, @1); }
    | expr                      { $$ = index_arg(p, $1); }
    ;

%%

/* ------------------------------------------------------------ AST helpers */

static PtrVec *push(ParseCtx *p, PtrVec *v, void *x)
{
    vec_push(p->arena, v, x);
    return v;
}

static AstExpr *leaf(ParseCtx *p, AstExprKind kind, SrcLoc loc)
{
    return ast_new_expr(p, kind, loc);
}

/* Calls, method calls, indexing and lists; keyword arguments must come last
 * and lists take none. */
static AstExpr *make_call(ParseCtx *p, AstExprKind kind, const char *name, AstExpr *lhs,
                          PtrVec *args, SrcLoc loc)
{
    bool seen_kw = false;
    for (int i = 0; i < args->len; i++) {
        AstArg *a = args->data[i];
        if (a->name && kind == AST_LIST) {
            diag_error(p->diag, a->loc, "a list cannot have keyword arguments");
            break;
        }
        if (a->name) seen_kw = true;
        else if (seen_kw) {
            diag_error(p->diag, a->loc, "positional argument after keyword argument");
            break;
        }
    }
    return ast_new_call(p, kind, name, lhs, args, loc);
}

/* Indexing only inserts axes: anything but ':' and None is an error here, so
 * sema never sees it. */
static AstExpr *index_arg(ParseCtx *p, AstExpr *e)
{
    diag_error(p->diag, e->loc, "an index can only hold ':' and None (x[:, None])");
    return e;
}

static AstStmt *make_bind(ParseCtx *p, AstStmtKind kind, SrcLoc loc, const char *name,
                          SrcLoc name_loc, int op, AstExpr *value)
{
    AstStmt *s = ast_new_stmt(p, kind, loc);
    s->name = name;
    s->name_loc = name_loc;
    s->op = op;
    s->value = value;
    return ast_seal_stmt(p, s);
}

/* range(hi) is range(0, hi): the AST always has lo, so sema has one case. */
static AstStmt *make_for(ParseCtx *p, SrcLoc loc, const char *name, SrcLoc name_loc,
                         AstExpr *lo, AstExpr *hi, AstExpr *step, AstStmt *body)
{
    AstStmt *s = ast_new_stmt(p, AST_FOR, loc);
    s->name = name;
    s->name_loc = name_loc;
    if (!lo) lo = leaf(p, AST_INT, hi->loc);
    s->lo = lo;
    s->hi = hi;
    s->step = step;
    s->body = body;
    return ast_seal_stmt(p, s);
}

static AstStmt *make_if(ParseCtx *p, SrcLoc loc, AstExpr *cond, AstStmt *then_body,
                        AstStmt *else_body)
{
    AstStmt *s = ast_new_stmt(p, AST_IF, loc);
    s->value = cond;
    s->body = then_body;
    s->else_body = else_body;
    return ast_seal_stmt(p, s);
}

static AstParam *make_param(ParseCtx *p, SrcLoc loc, bool is_const, const char *name,
                            AstType type, AstExpr *def, SrcLoc def_loc)
{
    AstParam *pm = ARENA_NEW(p->arena, AstParam);
    pm->loc = loc;
    pm->name = name;
    pm->type = type;
    pm->is_const = is_const;
    pm->default_value = def;
    pm->default_loc = def_loc;
    return pm;
}

static AstDecl *make_func(ParseCtx *p, AstDeclKind kind, SrcLoc loc, const char *name,
                          SrcLoc name_loc, PtrVec *params, PtrVec *settings, AstStmt *body)
{
    AstDecl *d = ARENA_NEW(p->arena, AstDecl);
    d->kind = kind;
    d->loc = loc;
    d->name = name;
    d->name_loc = name_loc;
    d->body = body;
    d->nparams = params->len;
    d->params = ARENA_ARRAY(p->arena, AstParam, params->len);
    for (int i = 0; i < params->len; i++) {
        d->params[i] = *(AstParam *)params->data[i];
        if (kind == AST_KERNEL && !d->params[i].type.name)
            diag_error(p->diag, d->params[i].loc, "kernel parameter '%s' needs a type (e.g. '%s: i32')",
                       d->params[i].name, d->params[i].name);
        /* A kernel's runtime parameters come from the launch; a helper's from the
         * call, where an omitted one takes its (compile-time) default. */
        if (kind == AST_KERNEL && d->params[i].default_value && !d->params[i].is_const)
            diag_error(p->diag, d->params[i].default_loc, "only const parameters can have a default value");
    }
    if (settings) {
        d->nsettings = settings->len;
        d->settings = ARENA_ARRAY(p->arena, AstSetting, settings->len);
        for (int i = 0; i < settings->len; i++) d->settings[i] = *(AstSetting *)settings->data[i];
    }
    return d;
}

/* `import "attention_fwd";` / `import attention_fwd;`: the driver resolves and
 * loads the module (compiler/driver/modules.c); sema never sees these. */
static AstDecl *make_import(ParseCtx *p, SrcLoc loc, const char *module, SrcLoc name_loc)
{
    AstDecl *d = ARENA_NEW(p->arena, AstDecl);
    d->kind = AST_IMPORT;
    d->loc = loc;
    d->name = module;
    d->name_loc = name_loc;
    if (!module[0]) diag_error(p->diag, name_loc, "an import needs a module name (import \"attention_fwd\";)");
    return d;
}

/* `import "variants/alibi" as alibi;`: the module's helpers and consts are renamed
 * alibi_NAME (its hooks then bind nothing: the file composes them). `as` is not a
 * keyword: a name that reads "as" here. */
static AstDecl *make_import_as(ParseCtx *p, AstDecl *d, const char *as, SrcLoc as_loc, const char *alias,
                               SrcLoc alias_loc)
{
    if (strcmp(as, "as") != 0)
        diag_error(p->diag, as_loc, "expected 'as' or ';' after the module name, got '%s' "
                   "(import \"variants/alibi\" as alibi;)", as);
    d->of = alias;
    d->of_loc = alias_loc;
    return d;
}

/* `param doc_ids: *i32;`: a runtime parameter of every kernel that reads it
 * (sema appends it to the kernel's parameters). One AstParam, in params[0]. */
static AstDecl *make_module_param(ParseCtx *p, SrcLoc loc, const char *name, SrcLoc name_loc, AstType type)
{
    AstDecl *d = ARENA_NEW(p->arena, AstDecl);
    d->kind = AST_PARAM;
    d->loc = loc;
    d->name = name;
    d->name_loc = name_loc;
    d->nparams = 1;
    d->params = ARENA_NEW(p->arena, AstParam);
    d->params[0] = (AstParam){.loc = name_loc, .name = name, .type = type};
    return d;
}

/* `param bias: *f32 differentiable;`: the backward also returns the param's gradient
 * (sema checks the type; grad.c's param_grads derives it). The one word a param's type
 * may be followed by. */
static void mark_differentiable(ParseCtx *p, AstDecl *d, const char *word, SrcLoc loc)
{
    if (strcmp(word, "differentiable") != 0) {
        diag_error(p->diag, loc, "expected ';' or 'differentiable' after the type of param '%s', got '%s'", d->name,
                   word);
        return;
    }
    d->params[0].differentiable = true;
    d->params[0].differentiable_loc = loc;
}

/* `kernel attn_fwd_f16 = attn_fwd(T = f16);`: every argument binds a const
 * parameter by name, once; sema checks the names against the generic kernel
 * (which may come from another module) and expands the instance. */
static AstDecl *make_instance(ParseCtx *p, SrcLoc loc, const char *name, SrcLoc name_loc, const char *of,
                              SrcLoc of_loc, PtrVec *args)
{
    AstDecl *d = ARENA_NEW(p->arena, AstDecl);
    d->kind = AST_INSTANCE;
    d->loc = loc;
    d->name = name;
    d->name_loc = name_loc;
    d->of = of;
    d->of_loc = of_loc;
    d->nbindings = args->len;
    d->bindings = ARENA_ARRAY(p->arena, AstArg, args->len ? args->len : 1);
    for (int i = 0; i < args->len; i++) {
        AstArg *a = args->data[i];
        d->bindings[i] = *a;
        if (!a->name) {
            diag_error(p->diag, a->loc, "an instantiation binds const parameters by name (%s(T = f16))", of);
            continue;
        }
        for (int j = 0; j < i; j++)
            if (d->bindings[j].name && !strcmp(d->bindings[j].name, a->name)) {
                diag_error(p->diag, a->loc, "'%s' is bound twice", a->name);
                break;
            }
    }
    return d;
}

/* ------------------------------------------------------------ error messages */

/* Bison's name of a symbol without the double quotes of an alias:
 * "'let'" -> 'let', "identifier" -> identifier. */
static void sym_text(char *buf, size_t n, yysymbol_kind_t s)
{
    const char *name = yysymbol_name(s);
    size_t len = strlen(name);
    if (len >= 2 && name[0] == '"' && name[len - 1] == '"') {
        name++;
        len -= 2;
    }
    if (len >= n) len = n - 1;
    memcpy(buf, name, len);
    buf[len] = 0;
}

/* How the lookahead token reads in a message: 'x' for punctuation and
 * keywords, identifier 'foo', number '42', string, end of file. */
static void describe_lookahead(ParseCtx *p, char *buf, size_t n)
{
    switch (p->last_kind) {
    case KILN_YYEOF: snprintf(buf, n, "end of file"); break;
    case NAME: snprintf(buf, n, "identifier '%s'", p->last_text); break;
    case INT:
    case FLOAT: snprintf(buf, n, "number '%s'", p->last_text); break;
    case STRING: snprintf(buf, n, "string"); break;
    default: snprintf(buf, n, "'%s'", p->last_text); break;
    }
}

/* Tokens that can end an expression: after them a missing ';' is the
 * likeliest mistake. */
static bool ends_expression(int kind)
{
    return kind == NAME || kind == INT || kind == FLOAT || kind == STRING || kind == KW_TRUE ||
           kind == KW_FALSE || kind == ')' || kind == ']';
}

static bool expects(const yysymbol_kind_t *exp, int n, const char *name)
{
    char buf[32];
    for (int i = 0; i < n; i++) {
        sym_text(buf, sizeof buf, exp[i]);
        if (strcmp(buf, name) == 0) return true;
    }
    return false;
}

/* Point just after the previous token, or at the lookahead when there is none
 * (a missing ';' is best shown where it should have been). */
static SrcLoc after_prev(ParseCtx *p)
{
    return p->prev_end.line ? p->prev_end : p->last_loc;
}

static bool is_opener(int kind) { return kind == '(' || kind == '[' || kind == '{'; }

/* The innermost bracket still open before the lookahead, or -1. */
static int open_bracket_index(ParseCtx *p)
{
    int i = p->nest - 1;
    if (is_opener(p->last_kind)) i--;
    return i;
}

static void note_open(ParseCtx *p, int i)
{
    if (i >= 0 && i < PARSE_MAX_NEST)
        diag_note(p->diag, p->brace_loc[i], "to match this '%c'", p->brace_ch[i]);
}

/* "expected A, B or C before X" for a short list of expected tokens. */
static void expected_list(ParseCtx *p, const yysymbol_kind_t *exp, int n, const char *look)
{
    StrBuf sb;
    sb_init(&sb);
    for (int i = 0; i < n; i++) {
        char name[32];
        sym_text(name, sizeof name, exp[i]);
        if (i) sb_puts(&sb, i == n - 1 ? " or " : ", ");
        sb_puts(&sb, name);
    }
    diag_error(p->diag, p->last_loc, "expected %s before %s", sb.data, look);
    sb_free(&sb);
}

/* Turn bison's view of a syntax error (the lookahead and the exact set of
 * tokens LAC says could come instead) into the message a person needs. The
 * checks go from the most specific situation to the most general. */
static int yyreport_syntax_error(const yypcontext_t *ctx, void *scanner, ParseCtx *p)
{
    (void)scanner;
    if (p->stop) return 0;
    /* A second error on the same line with no ';' or '}' since the first is
     * almost always a cascade of the first: keep quiet. */
    if (p->err_tok && p->sync_tok <= p->err_tok && p->last_loc.line == p->err_line) return 0;
    p->err_tok = p->ntok;
    p->err_line = p->last_loc.line;
    yysymbol_kind_t exp[64];
    int n = yypcontext_expected_tokens(ctx, exp, 64);
    if (n < 0) n = 0;
    char look[sizeof p->last_text + 16];   /* "identifier '" + the token + "'": never cut */
    describe_lookahead(p, look, sizeof look);
    int k = p->last_kind;
    int ob = open_bracket_index(p);
    char closer[8] = "";
    if (ob >= 0) {
        char c = p->brace_ch[ob];
        snprintf(closer, sizeof closer, "'%c'", c == '(' ? ')' : c == '[' ? ']' : '}');
    }

    if (expects(exp, n, "';'") && ends_expression(p->prev_kind)) {
        diag_error(p->diag, after_prev(p), "expected ';' after expression");
    } else if (k == KILN_YYEOF) {
        if (ob >= 0 && expects(exp, n, closer)) {
            diag_error(p->diag, after_prev(p), "expected %s at end of file", closer);
            note_open(p, ob);
        } else {
            diag_error(p->diag, after_prev(p), "unexpected end of file");
        }
    } else if (expects(exp, n, "end of file")) {
        /* at file level, between declarations */
        if (k == ')' || k == ']' || k == '}')
            diag_error(p->diag, p->last_loc, "unexpected %s", look);
        else
            diag_error(p->diag, p->last_loc, "expected 'kernel', 'fn' or 'const' before %s", look);
    } else if ((k == KW_KERNEL || k == KW_FN) && ob >= 0 && expects(exp, n, closer)) {
        diag_error(p->diag, p->last_loc, "expected %s before %s", closer, look);
        note_open(p, ob);
    } else if (k == KW_NONE && expects(exp, n, "identifier")) {
        diag_error(p->diag, p->last_loc,
                   "'None' is not a value; it is only allowed in an index (x[:, None]) or as a call "
                   "argument (axis = None)");
    } else if (expects(exp, n, "identifier") && expects(exp, n, "number") &&
               !expects(exp, n, "'let'")) {
        diag_error(p->diag, p->last_loc, "expected expression%s before %s",
                   expects(exp, n, "';'") ? " or ';'" : "", look);
    } else if (n >= 1 && n <= 4) {
        expected_list(p, exp, n, look);
    } else if (ob >= 0 && p->brace_ch[ob] != '{' && expects(exp, n, closer)) {
        diag_error(p->diag, p->last_loc, "expected %s before %s", closer, look);
        note_open(p, ob);
    } else {
        diag_error(p->diag, p->last_loc, "unexpected %s", look);
    }
    return 0;
}

/* Bison calls this only when its stack is exhausted (very deep nesting). */
static void kiln_yyerror(SrcLoc *loc, void *scanner, ParseCtx *p, const char *msg)
{
    (void)scanner;
    if (p->stop) return;
    p->stop = true;
    if (strstr(msg, "exhausted"))
        diag_error(p->diag, *loc, "program nested too deeply");
    else
        diag_error(p->diag, *loc, "%s", msg);
}
